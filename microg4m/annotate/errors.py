"""A refused request: the HTTP status and a message that says what was wrong."""


class Refused(ValueError):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message
