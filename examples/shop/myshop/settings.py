"""MyShop: a Django project that installs zett (``pip install zett``) and adds its chat.

What zett needs is marked "zett": three installed apps, the ASGI application, a channel
layer, LOGIN_URL and two ZETT_* settings. Everything else is an ordinary small project.
"""

import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = "example-shop-not-secret"
DEBUG = True
ALLOWED_HOSTS: list[str] = []  # as startproject leaves it: DEBUG admits the local hosts

INSTALLED_APPS = [
    "daphne",  # zett: first, so runserver serves websockets
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",  # zett
    "agent_app",  # zett
    "shop",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]

ROOT_URLCONF = "myshop.urls"
ASGI_APPLICATION = "myshop.asgi.application"  # zett
CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}  # zett

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # The shop's own base.html, login page and its frame for the chat pages.
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("SHOP_DATABASE", str(BASE_DIR / "shop.sqlite3")),
        "OPTIONS": {"timeout": 20},
    }
}

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "/static/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LOGIN_URL = "login"  # zett links here to sign in
LOGIN_REDIRECT_URL = "agent_app:session_list"

# zett: which model answers (the shop's offline one here), and a new chat's assistant.
ZETT_MODEL = os.environ.get("ZETT_MODEL", "shop.offline_model:ShopModel")
ZETT_DEFAULT_ASSISTANT = "support"
