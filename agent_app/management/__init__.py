"""Management commands of the zett app."""
