"""Common city and country names the offline demo model reads as time zones, so "what
time is it in Tokyo?" asks the clock for ``Asia/Tokyo`` (an IANA name works as well)."""

from __future__ import annotations

import re

__all__ = ["CITY_ZONES", "zone_named_in"]

#: Lower-case place name → IANA time zone.
CITY_ZONES: dict[str, str] = {
    "tokyo": "Asia/Tokyo",
    "japan": "Asia/Tokyo",
    "osaka": "Asia/Tokyo",
    "seoul": "Asia/Seoul",
    "beijing": "Asia/Shanghai",
    "shanghai": "Asia/Shanghai",
    "hong kong": "Asia/Hong_Kong",
    "singapore": "Asia/Singapore",
    "bangkok": "Asia/Bangkok",
    "delhi": "Asia/Kolkata",
    "new delhi": "Asia/Kolkata",
    "mumbai": "Asia/Kolkata",
    "india": "Asia/Kolkata",
    "dubai": "Asia/Dubai",
    "istanbul": "Europe/Istanbul",
    "moscow": "Europe/Moscow",
    "athens": "Europe/Athens",
    "berlin": "Europe/Berlin",
    "germany": "Europe/Berlin",
    "munich": "Europe/Berlin",
    "vienna": "Europe/Vienna",
    "zurich": "Europe/Zurich",
    "paris": "Europe/Paris",
    "france": "Europe/Paris",
    "amsterdam": "Europe/Amsterdam",
    "brussels": "Europe/Brussels",
    "madrid": "Europe/Madrid",
    "barcelona": "Europe/Madrid",
    "rome": "Europe/Rome",
    "milan": "Europe/Rome",
    "stockholm": "Europe/Stockholm",
    "oslo": "Europe/Oslo",
    "copenhagen": "Europe/Copenhagen",
    "helsinki": "Europe/Helsinki",
    "warsaw": "Europe/Warsaw",
    "prague": "Europe/Prague",
    "lisbon": "Europe/Lisbon",
    "london": "Europe/London",
    "dublin": "Europe/Dublin",
    "reykjavik": "Atlantic/Reykjavik",
    "new york": "America/New_York",
    "nyc": "America/New_York",
    "boston": "America/New_York",
    "washington": "America/New_York",
    "toronto": "America/Toronto",
    "chicago": "America/Chicago",
    "denver": "America/Denver",
    "los angeles": "America/Los_Angeles",
    "san francisco": "America/Los_Angeles",
    "seattle": "America/Los_Angeles",
    "vancouver": "America/Vancouver",
    "mexico city": "America/Mexico_City",
    "sao paulo": "America/Sao_Paulo",
    "são paulo": "America/Sao_Paulo",
    "buenos aires": "America/Argentina/Buenos_Aires",
    "cairo": "Africa/Cairo",
    "lagos": "Africa/Lagos",
    "nairobi": "Africa/Nairobi",
    "johannesburg": "Africa/Johannesburg",
    "sydney": "Australia/Sydney",
    "melbourne": "Australia/Melbourne",
    "auckland": "Pacific/Auckland",
    "honolulu": "Pacific/Honolulu",
}

# Longest names first, so "new delhi" wins over "delhi".
_PLACES = re.compile(
    r"\b("
    + "|".join(re.escape(name) for name in sorted(CITY_ZONES, key=len, reverse=True))
    + r")\b",
    re.IGNORECASE,
)


def zone_named_in(text: str) -> str | None:
    """The time zone of the first place ``text`` names (``CITY_ZONES``), else None."""
    found = _PLACES.search(text)
    return CITY_ZONES[found.group(1).lower()] if found else None
