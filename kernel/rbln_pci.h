/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rbln: PCI resources (rbln_pci.c) - BARs, bus mastering, DMA mask, MSI-X
 * and the doorbell.
 */
#ifndef RBLN_PCI_H
#define RBLN_PCI_H

#include <linux/types.h>

struct rbln_device;

/* The MSI-X vectors the driver requested; rbln_pci.c's own. */
struct rbln_irqs {
	int admin;
	int event;
	int ring;
	bool ring_ok;		/* vector and firmware-iface 1.2 */
	bool requested;
};

int rbln_pci_map(struct rbln_device *rdev);
int rbln_pci_setup_irqs(struct rbln_device *rdev);
void rbln_pci_free_irqs(struct rbln_device *rdev);
bool rbln_pci_has_ring_irq(struct rbln_device *rdev);
void rbln_doorbell(struct rbln_device *rdev, u32 vector);

#endif /* RBLN_PCI_H */
