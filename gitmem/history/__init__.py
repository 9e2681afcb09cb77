"""The time machine: history, diff, blame, rollback, revert and reading as of a past moment."""


def __getattr__(name: str) -> object:
    # gitmem 0.1 had a module at this path; its names resolve for one more release
    from gitmem.oldpaths import old_attribute

    return old_attribute("history", name)
