"""Chunking by structure: functions and classes, headings, and size with overlap."""

from __future__ import annotations

from idee_notebook_agent.knowledge.chunking import Document, chunk_document, language_for

PY = '''"""Herramientas de mapa."""
import math

RADIO = 6378137


# Convierte grados a metros
@staticmethod
def a_metros(lon, lat):
    """Web Mercator."""
    x = math.radians(lon) * RADIO
    y = math.log(math.tan(math.pi / 4 + math.radians(lat) / 2)) * RADIO
    return x, y


class Visor:
    """Un visor."""

    def __init__(self):
        self.capas = []

    def anadir(self, capa):
        self.capas.append(capa)
'''


def _lines(text: str, first: int, last: int) -> str:
    return "\n".join(text.split("\n")[first - 1 : last])


def test_python_is_cut_at_functions_and_classes_with_comments_and_decorators():
    chunks = chunk_document(Document(PY, "pkg/visor.py"), min_chars=0)
    titles = [c.title for c in chunks]
    assert titles == ["módulo (nivel superior)", "def a_metros", "class Visor"]
    func = chunks[1]
    assert func.content.startswith("# Convierte grados a metros\n@staticmethod\ndef a_metros")
    assert (func.line_start, func.line_end) == (7, 13)
    assert func.content == _lines(PY, 7, 13)
    assert all(c.language == "python" and c.source == "pkg/visor.py" for c in chunks)
    assert [c.chunk_index for c in chunks] == [0, 1, 2]


def test_a_long_python_class_is_cut_by_method_and_a_long_method_by_size():
    body = "".join(f"        valor_{i} = {i} * 2  # paso {i}\n" for i in range(150))
    code = f"class Grande:\n    x = 1\n\n    def corto(self):\n        return 1\n\n    def largo(self):\n{body}"
    chunks = chunk_document(Document(code, "g.py"), min_chars=0)
    titles = [c.title for c in chunks]
    assert titles[0] == "class Grande" and titles[1] == "Grande.corto"
    largos = [c for c in chunks if c.title.startswith("Grande.largo (")]
    assert len(largos) >= 3 and all(len(c.content) <= 1500 for c in largos)
    # pieces keep their real line ranges, inside the method, and overlap a little
    assert largos[0].line_start == 7 and largos[-1].line_end == code.count("\n")
    for a, b in zip(largos, largos[1:], strict=False):
        assert b.line_start <= a.line_end  # overlap
        assert b.content.split("\n")[0].strip() in _lines(code, b.line_start, b.line_end)


def test_broken_python_falls_back_to_size_chunks():
    chunks = chunk_document(Document("def roto(:\n    pass\n", "x.py"))
    assert len(chunks) == 1 and chunks[0].title == "x.py"


JS = """import { a } from './a';

/**
 * Crea un mapa.
 */
export function crearMapa(id) {
  return IDEE.map({ container: id });
}

export default class Plugin {
  activar() { return true; }
}

const doble = (x) => x * 2;
IDEE.utils.suma = function (a, b) { return a + b; };
"""


def test_javascript_is_cut_at_functions_and_classes_with_jsdoc():
    chunks = chunk_document(Document(JS, "src/plugin.js"), min_chars=0)
    by_title = {c.title: c for c in chunks}
    assert set(by_title) == {
        "módulo (nivel superior)",
        "function crearMapa",
        "class Plugin",
        "function doble",
        "function IDEE.utils.suma",
    }
    crear = by_title["function crearMapa"]
    assert crear.content.startswith("/**") and (crear.line_start, crear.line_end) == (3, 8)
    assert by_title["class Plugin"].line_start == 10


def test_typescript_interfaces_types_and_long_classes_by_member():
    members = "".join(
        f"  metodo{i}(x: number): number {{\n    return x + {i};\n  }}\n" for i in range(60)
    )
    ts = f"interface Opciones {{ zoom: number }}\ntype Id = string;\nexport class Servicio {{\n{members}}}\n"
    chunks = chunk_document(Document(ts, "src/servicio.ts"), min_chars=0)
    titles = [c.title for c in chunks]
    assert "interface Opciones" in titles and "type Id" in titles
    assert "Servicio.metodo0" in titles and "Servicio.metodo59" in titles
    assert all(c.language == "typescript" for c in chunks)


MD = """---
title: Guía
---
# Guía

Introducción con suficiente texto para quedarse sola en su fragmento, sin juntarse con nada.

## Instalación

```bash
# esto no es un título
pip install api-idee
```

## Capas

### WMS

Añade capas WMS con IDEE.layer.WMS y la URL del servicio.
"""


def test_markdown_is_cut_at_headings_and_ignores_hashes_in_code_and_front_matter():
    chunks = chunk_document(Document(MD, "docs/guia.md"), min_chars=0)
    titles = [c.title for c in chunks]
    assert "Guía > Instalación" in titles and "Guía > Capas > WMS" in titles
    assert not any("no es un título" in t for t in titles)
    install = next(c for c in chunks if c.title == "Guía > Instalación")
    assert "pip install api-idee" in install.content
    assert install.content == _lines(MD, install.line_start, install.line_end).strip("\n")
    assert not any(t == "title: x" or "title:" in t for t in titles)


def test_html_is_cut_at_headings_without_page_furniture():
    html = """<html><head><title>Ayuda</title><style>p{}</style></head><body>
<nav><a href="/">Inicio</a> menú</nav>
<main>
<h1>Ayuda</h1>
<p>Texto de la ayuda.</p>
<h2>Capas WMS</h2>
<p>Usa <code>IDEE.layer.WMS</code>.</p>
<script>alert('x')</script>
<pre>const a = 1;
  const b = 2;</pre>
</main><footer>pie de página</footer></body></html>"""
    chunks = chunk_document(Document(html, "https://docs.example.org/ayuda.html"), min_chars=0)
    assert [c.title for c in chunks] == ["Ayuda", "Ayuda > Capas WMS"]
    wms = chunks[1]
    assert "IDEE.layer.WMS" in wms.content and "  const b = 2;" in wms.content
    joined = "\n".join(c.content for c in chunks)
    assert "alert" not in joined and "menú" not in joined and "pie de página" not in joined
    assert wms.line_start == 6 and wms.language == "html"


def test_plain_text_is_cut_by_size_with_overlap():
    text = "\n".join(f"Línea {i}: la ortofoto del PNOA cubre toda España." for i in range(200))
    chunks = chunk_document(Document(text, "notas.txt"))
    assert len(chunks) > 3 and all(len(c.content) <= 1500 for c in chunks)
    for a, b in zip(chunks, chunks[1:], strict=False):
        assert b.line_start <= a.line_end  # consecutive pieces share lines
        assert b.content.split("\n")[0] in a.content
    assert chunks[0].line_start == 1 and chunks[-1].line_end == 200
    assert chunks[0].title == f"notas.txt (1/{len(chunks)})"


def test_small_neighbours_are_merged_and_empty_documents_give_nothing():
    md = "# A\n\nuno\n\n# B\n\ndos\n\n# C\n\n" + "tres " * 80
    chunks = chunk_document(Document(md, "m.md"))
    assert chunks[0].title.startswith("A · B")
    assert chunk_document(Document("   \n\n", "vacio.md")) == []


def test_language_from_file_name():
    assert language_for("a/b.tsx") == "tsx"
    assert language_for("README.md") == "markdown"
    assert language_for("x.java") == "java"
    assert language_for("Makefile") == "text"
    assert language_for("https://x.org/page.html?x=1") == "html"
