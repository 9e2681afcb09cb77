"""What may be committed: secrets found and redacted, sizes bounded, history scanned."""
