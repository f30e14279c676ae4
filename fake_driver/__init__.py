"""A libvirt-like host for the real LibvirtDriver.

``topology`` describes a host declaratively (pure data, no Nova import),
``pci`` its PCI devices and the cloud's ``[pci]`` config; ``domain_xml``
reads what a domain definition asks for; ``host`` is the fake libvirt
connection that really holds pinned pCPUs, hugepages and PCI devices, built
on Nova's own ``nova.tests.fixtures.libvirt`` (extended, not forked).
"""
