from django.shortcuts import render


def home(request):
    return render(request, "shop/home.html")


def product(request):
    """A page of the shop's own with zett's chat in it ({% zett_chat %})."""
    return render(request, "shop/product.html")
