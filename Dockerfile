# Production image: the same code and pinned dependencies as `make run`, with external services.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 CONSOLE_DATA_DIR=/data
WORKDIR /app
COPY pyproject.toml ./
COPY . .
RUN pip install --no-cache-dir -e . && mkdir -p /data
EXPOSE 8000
CMD ["gunicorn", "console.wsgi", "--bind", "0.0.0.0:8000", "--workers", "4", "--threads", "4"]
