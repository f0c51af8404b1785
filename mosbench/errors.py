"""Errors a user can cause. The CLI prints one line for these and exits non-zero, no traceback."""


class UserError(Exception):
    """Bad input or an unmet precondition that the user can fix."""


class PointFailed(Exception):
    """One data point could not be measured; it is stored as failed with this reason, never as a number."""
