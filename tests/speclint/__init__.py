"""speclint's tests, one file per sub-package or concern of speclint/; support.py is what they share."""
