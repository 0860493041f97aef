"""Demo data of this app, run at the end of `load_demo` (registered in apps.py)."""

def demo_policies(**kwargs) -> None:
    return None
