"""studies.lib: the library the study commands share."""
