#!/usr/bin/env python
import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    if sys.argv[1:2] in (["backup"], ["restore"]):
        # Before Django: the settings start the embedded database as they load, and a restore must
        # lay its cluster down in the empty data folder first (console/backup.py).
        from console import backup

        sys.exit(backup.main(sys.argv[1:]))
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
