"""The URDF's XML, read as ROS' own parser reads it.

urdfdom (robot_state_publisher, Pinocchio, KDL) reads the XML with TinyXML, which knows no
namespaces: an element is named as written, `xmlns` is an ordinary attribute, and a prefix no one
declared (`<ros:namespace>` inside a `<gazebo>` block) is simply part of a name. Expat without
namespace processing reads the same way; its events build an ElementTree. Leading whitespace and a
UTF-8 byte-order mark before `<?xml` (a robot_description that starts with a newline) are skipped.
DTD entity declarations are refused: no URDF has one and urdfdom would not expand them, so they
only serve entity-expansion and external-file attacks.
"""
from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from xml.parsers import expat

from ..model import URDFError

__all__ = ["read_robot"]

_SPACE = " \t\r\n"  # XML's whitespace
_BOM = "\ufeff"


def read_robot(source: str | os.PathLike[str]) -> ET.Element:
    """The <robot> element of a URDF given as an XML string or a file path."""
    text = os.fspath(source)
    xml = text.lstrip(_SPACE).removeprefix(_BOM).lstrip(_SPACE)
    if xml.startswith("<"):
        robot = _parse(xml, "URDF XML string")
    elif os.path.isfile(text):
        with open(text, "rb") as f:
            data = f.read()
        # Bytes, not text: expat honours the file's own encoding declaration.
        space = _SPACE.encode()
        robot = _parse(data.lstrip(space).removeprefix(_BOM.encode()).lstrip(space), repr(text))
    else:
        raise URDFError(f"source: {text!r} is neither a URDF XML string nor an existing file")
    if robot.tag != "robot":
        raise URDFError(f"source: root element is <{robot.tag}>, expected <robot>")
    return robot


def _parse(data: str | bytes, what: str) -> ET.Element:
    builder = ET.TreeBuilder()
    parser = expat.ParserCreate()  # no namespace separator: names stay as written
    parser.buffer_text = True
    parser.StartElementHandler = builder.start
    parser.EndElementHandler = builder.end
    parser.CharacterDataHandler = builder.data
    parser.EntityDeclHandler = _refuse_entity
    try:
        parser.Parse(data, True)
    except expat.ExpatError as exc:
        raise URDFError(f"source: {what} does not parse as XML: {exc}") from exc
    return builder.close()


def _refuse_entity(name: str, *_: object) -> None:
    raise URDFError(f"source: the XML declares the entity {name!r}; URDFs use no DTD entities (refused: an "
                    "entity can expand to gigabytes or read other files)")
