"""A libvirt-like host for the real LibvirtDriver.

``topology`` describes a host declaratively (pure data, no Nova import);
``domain_xml`` reads what a domain definition asks for; ``host`` is the
fake libvirt connection that really holds pinned pCPUs and hugepages, built on
Nova's own ``nova.tests.fixtures.libvirt`` (extended, not forked).
"""
