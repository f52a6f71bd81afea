"""The host's pages: a product page with one widget, one with two, one with a launcher;
zett's own pages stay under /chat/."""

from django.shortcuts import render
from django.urls import include, path


def page(template: str):
    def view(request):
        flags = {
            "chat": request.GET.get("chat", ""),
            # ?bare: the page without its widget (the styles to compare with);
            # ?notools: without the host script that answers highlight_product.
            "bare": "bare" in request.GET,
            "notools": "notools" in request.GET,
        }
        return render(request, f"host/{template}.html", flags)

    return view


urlpatterns = [
    path("", page("product"), name="product"),
    path("two/", page("two"), name="two"),
    path("launcher/", page("launcher"), name="launcher"),
    path("blank/", page("blank"), name="blank"),
    # The layout zett's own pages use here (templates/agent_app/base.html), on its own.
    path("layout/", page("layout_page"), name="layout"),
    path("chat/", include("agent_app.urls")),
]
