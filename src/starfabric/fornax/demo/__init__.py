"""The demo steps of Fornax in one place (what `starfabric demo` runs): the emulated NIC
alone (engine.py), engine + manager on a scenario (manager.py) and a chaos run with its
timeline plot and trace (chaos.py)."""
