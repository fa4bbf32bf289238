"""A real Open vSwitch to hold the OVS-like baseline to (issue 20): a private ovs-vswitchd on
the userspace datapath (`instance`), a conntrack security-group pipeline (`pipeline`),
pre-built frames (`frames`) sent from two namespaces (`driver`), what is read from the daemon
(`measure`) and the measured run (`scenario`). benchmarks/ovs_real.py compares it with the
model; nothing here is imported by the model itself."""
