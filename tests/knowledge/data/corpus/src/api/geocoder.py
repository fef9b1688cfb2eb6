"""Cliente mínimo del geocodificador de CartoCiudad."""

import httpx

CARTOCIUDAD = "https://www.cartociudad.es/geocoder/api/geocoder"


def geocode(query, limit=5):
    """Busca una dirección o topónimo y devuelve candidatos con latitud y longitud."""
    reply = httpx.get(f"{CARTOCIUDAD}/candidatesJsonp", params={"q": query, "limit": limit})
    reply.raise_for_status()
    return reply.json()


def reverse_geocode(lat, lon):
    """Geocodificación inversa: la dirección postal más cercana a un punto."""
    reply = httpx.get(f"{CARTOCIUDAD}/reverseGeocode", params={"lat": lat, "lon": lon})
    reply.raise_for_status()
    return reply.json()


class GeocoderCache:
    """Guarda en memoria las respuestas para no repetir consultas iguales."""

    def __init__(self):
        self._store = {}

    def get(self, query):
        if query not in self._store:
            self._store[query] = geocode(query)
        return self._store[query]
