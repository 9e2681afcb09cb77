"""The time machine: history, diff, blame, rollback, revert and reading as of a past moment."""
