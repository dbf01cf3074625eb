"""The one exception type whose message is meant for the user."""


class UserError(Exception):
    """A problem the user can fix: the CLI prints ``error: <message>`` and exits 1.

    Anything else that escapes a command is a bug and keeps its traceback.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message
