"""Extensions: ordered hooks around every stage of a request. See ``extensions.base``."""
