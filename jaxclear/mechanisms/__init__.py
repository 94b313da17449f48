"""Mechanism models built on the engine (profiles, contact, laws, joints, integrate)."""

from . import slider_crank

MECHANISMS = {"slider_crank": slider_crank}
