"""Stored embedder models with their SVD components in float16, as `embedder.dumps` now writes them.

The models of live versions (current, or still re-embedding) are rewritten; retired ones are
already empty. Loading takes either form, so a version whose model cannot be read here is left
as it is rather than failing the migration.
"""

import io

from django.db import migrations


def _components_float16(apps, schema_editor):
    import joblib
    import numpy as np

    EmbedderVersion = apps.get_model("similarity", "EmbedderVersion")
    for version in EmbedderVersion.objects.exclude(state="retired").exclude(model=b"").only("pk", "model"):
        try:
            model = joblib.load(io.BytesIO(bytes(version.model)))
            svd = model.named_steps["svd"]
        except Exception:  # not a pipeline this code knows: keep it as stored
            continue
        if svd.components_.dtype == np.float16:
            continue
        svd.components_ = svd.components_.astype(np.float16)
        buffer = io.BytesIO()
        joblib.dump(model, buffer, compress=3)
        EmbedderVersion.objects.filter(pk=version.pk).update(model=buffer.getvalue())


class Migration(migrations.Migration):
    dependencies = [("similarity", "0004_decision_reference_checked")]

    operations = [migrations.RunPython(_components_float16, migrations.RunPython.noop)]
