"""The URDF's links and joints as a tree: named, one parent per link, one root, no loop.

Every walk is iterative (an explicit stack), so a chain of any depth loads: Python's recursion
limit would end a recursive walk near 1,000 links.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass

from ..model import URDFError
from .values import check_name, not_xacro

__all__ = ["MOVING", "Tree", "child_of", "depth_first", "parent_of", "read_tree"]

MOVING = ("revolute", "continuous", "prismatic")


@dataclass(frozen=True)
class Tree:
    """links: name -> <link>; children: link -> its child joints in document order;
    parent_joint: link -> the joint whose child it is; root: the link that is no joint's child."""

    links: dict[str, ET.Element]
    joints: list[ET.Element]
    children: dict[str, list[ET.Element]]
    parent_joint: dict[str, ET.Element]
    root: str


def parent_of(joint: ET.Element) -> str:
    return joint.find("parent").get("link")


def child_of(joint: ET.Element) -> str:
    return joint.find("child").get("link")


def read_tree(robot: ET.Element) -> Tree:
    """The checked tree of a <robot>; URDFError naming the element when it is not one."""
    links = _links(robot)
    joints = robot.findall("joint")
    children: dict[str, list[ET.Element]] = {name: [] for name in links}
    parent_joint: dict[str, ET.Element] = {}
    seen: set[str] = set()
    for j in joints:
        name = _check_joint(j, links, seen)
        child = child_of(j)
        if child in parent_joint:
            raise URDFError(f"joint {name!r}: link {child!r} has two parents (closed loops are not URDF); remove one "
                            "of the joints and model the loop as a constraint")
        parent_joint[child] = j
        children[parent_of(j)].append(j)
    tree = Tree(links, joints, children, parent_joint, _root(links, parent_joint))
    _check_reached(tree)
    return tree


def _links(robot: ET.Element) -> dict[str, ET.Element]:
    links: dict[str, ET.Element] = {}
    for link in robot.findall("link"):
        name = check_name(link.get("name"), "source: a <link>")
        if name in links:
            raise URDFError(f"link {name!r}: defined twice; rename or remove one of them")
        links[name] = link
    if not links:
        raise URDFError("source: the URDF has no <link>; if it came from xacro, check the macro was called "
                        "(an expanded file holds the links)")
    return links


def _check_joint(j: ET.Element, links: dict[str, ET.Element], seen: set[str]) -> str:
    """The joint's name, after checking it names its two existing links and a type we support."""
    p, c = j.find("parent"), j.find("child")
    ends = f"from link {p.get('link')!r} to link {c.get('link')!r}" if p is not None and c is not None else ""
    name = check_name(j.get("name"), f"source: a <joint> {ends}".rstrip())
    if name in seen:
        raise URDFError(f"joint {name!r}: defined twice; rename or remove one of them")
    seen.add(name)
    if p is None or c is None:
        raise URDFError(f"joint {name!r}: missing <parent> or <child>")
    for link in (p.get("link"), c.get("link")):
        if link is not None:
            not_xacro(link, f"joint {name!r}: link")
        if link not in links:
            raise URDFError(f"joint {name!r}: unknown link {link!r}; add a <link name={link!r}/> or correct the name")
    if j.get("type") not in MOVING + ("fixed", "floating"):
        raise URDFError(f"joint {name!r}: joint type {j.get('type')!r} is not supported (use revolute, "
                        "continuous, prismatic, fixed, or a floating root joint)")
    return name


def _root(links: dict[str, ET.Element], parent_joint: dict[str, ET.Element]) -> str:
    roots = [name for name in links if name not in parent_joint]
    if len(roots) > 1:
        raise URDFError(f"source: expected one root link (the link that is no joint's child), found {roots}; "
                        "connect them with joints (a fixed joint to a common root link), or remove the stray ones")
    if not roots:  # every link has a parent: the joints close a loop somewhere
        raise _loop_error(next(iter(links)), parent_joint)
    return roots[0]


def depth_first(tree: Tree, link: str) -> Iterator[ET.Element]:
    """The joints below `link`, depth-first, children in document order (each joint before its subtree)."""
    stack = list(reversed(tree.children[link]))
    while stack:
        joint = stack.pop()
        yield joint
        stack.extend(reversed(tree.children[child_of(joint)]))


def _check_reached(tree: Tree) -> None:
    """Every link hangs from the root; a link that does not sits on a loop of joints (one parent each)."""
    reached = {tree.root} | {child_of(j) for j in depth_first(tree, tree.root)}
    if len(reached) < len(tree.links):
        raise _loop_error(next(name for name in tree.links if name not in reached), tree.parent_joint)


def _loop_error(link: str, parent_joint: dict[str, ET.Element]) -> URDFError:
    """Walking up from a link that the root does not reach ends on a loop: name its joints."""
    path: list[str] = []
    on_path: set[str] = set()
    while link not in on_path:
        path.append(link)
        on_path.add(link)
        link = parent_of(parent_joint[link])
    loop = path[path.index(link):]  # each link's parent follows it: walk the loop downwards
    joints = [parent_joint[name] for name in reversed(loop)]
    order = {id(j): k for k, j in enumerate(parent_joint.values())}  # document order
    k = min(range(len(joints)), key=lambda i: order[id(joints[i])])
    joints = joints[k:] + joints[:k]  # start at the loop's first joint in the document
    first = joints[0]
    names = " -> ".join(repr(j.get("name")) for j in joints)
    return URDFError(f"joint {first.get('name')!r}: hangs link {child_of(first)!r} from its own descendant "
                     f"{parent_of(first)!r} (the joints {names} form a loop, and no link of it hangs from the root); "
                     "a URDF is a tree: remove one of these joints and model the loop as a LoopClosure")

