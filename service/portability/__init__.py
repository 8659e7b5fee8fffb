"""Moving memories out and back in: the export document format, and whole-store backups."""
