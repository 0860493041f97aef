from django.contrib import admin
from django.contrib.auth.decorators import login_required
from django.templatetags.static import static
from django.urls import include, path, re_path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from audit import views as audit_views
from console.accounts import views as accounts_views
from console.accounts.identity import views as identity_views
from console.core import health
from console.core.api import api_not_found
from console.ledger import views as ledger_views
from console.review import views as review_views

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("accounts/login/", accounts_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", identity_views.sign_out, name="logout"),
    path("", include("console.accounts.identity.urls")),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves its start-up script from a URL, so the page needs no inline script under the CSP.
    # The docs are a page people open in a browser: signed out, they go to sign-in and come back here
    # rather than meeting the API's bare 401.
    path("api/docs/", login_required(SpectacularSwaggerSplitView.as_view(url_name="schema")), name="api-docs"),
    path("api/v1/", include("console.api_urls")),
    re_path(r"^api/", api_not_found),
    path("", review_views.dashboard, name="dashboard"),
    path("refusals/", ledger_views.refusal_list, name="refusal-list"),
    path("decisions/<int:pk>/", review_views.decision_detail, name="decision-detail"),
    path("audit/", audit_views.audit_log, name="audit-log"),
    path("", include("console.accounts.urls")),
    path("", include("console.verification.urls")),
    path("", include("console.shadow.urls")),
    path("grading/", include("grading.urls")),
    path("", include("console.analysis.urls")),
    path("", include("console.trials.urls")),
    path("", include("console.governance.urls")),
    path("", include("console.notify.urls")),
    path("", include("console.similarity.urls")),
    # Browsers ask for /favicon.ico where a page names no icon (JSON, the API docs): no 404 in the log.
    path("nav/adjudication-backlog", review_views.adjudication_backlog, name="nav-adjudication-backlog"),
    path("favicon.ico", RedirectView.as_view(url=static("favicon.svg"), permanent=True)),
    path("", include("console.disputes.urls")),
    path("", include("console.monitoring.urls")),
]

handler400 = "console.core.middleware.bad_request"
handler403 = "console.core.middleware.permission_denied"
handler404 = "console.core.middleware.page_not_found"
handler500 = "console.core.middleware.server_error"
