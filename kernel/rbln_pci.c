// SPDX-License-Identifier: GPL-2.0
/*
 * rbln: PCI resources - BARs, bus mastering, DMA mask, MSI-X and doorbells.
 *
 * BAR0 holds the ivshmem-doorbell registers (IVPosition, Doorbell).  BAR2 is
 * the card's memory: the control region at its start, then the HBM
 * apertures.  Here BAR2 is claimed and its control region mapped;
 * rbln_hbm_init() maps the HBM apertures, write-combined, at probe.
 */
#include <linux/device.h>
#include <linux/dma-mapping.h>
#include <linux/interrupt.h>
#include <linux/pci.h>

#include "rbln_compat.h"
#include "rbln_drv.h"
#include "rbln_pci.h"

int rbln_pci_map(struct rbln_device *rdev)
{
	struct pci_dev *pdev = rdev->pdev;
	resource_size_t len;
	int ret;

	ret = pcim_enable_device(pdev);
	if (ret) {
		dev_err(&pdev->dev, "cannot enable the PCI device: %d\n", ret);
		return ret;
	}

	len = pci_resource_len(pdev, RBLN_BAR_REGS);
	if (!(pci_resource_flags(pdev, RBLN_BAR_REGS) & IORESOURCE_MEM) ||
	    len < RBLN_REGS_MIN_SIZE) {
		dev_info(&pdev->dev,
			 "not an rbln card: BAR%d is not a register BAR of at least %u bytes\n",
			 RBLN_BAR_REGS, RBLN_REGS_MIN_SIZE);
		return -ENODEV;
	}
	len = pci_resource_len(pdev, RBLN_BAR_MEM);
	if (!(pci_resource_flags(pdev, RBLN_BAR_MEM) & IORESOURCE_MEM) ||
	    len < RBLN_FW_CTRL_REGION_SIZE) {
		dev_info(&pdev->dev,
			 "not an rbln card: BAR%d is not a memory BAR of at least %u bytes\n",
			 RBLN_BAR_MEM, RBLN_FW_CTRL_REGION_SIZE);
		return -ENODEV;
	}

	rdev->regs = rbln_pcim_iomap_bar(pdev, RBLN_BAR_REGS, RBLN_DRIVER_NAME);
	if (IS_ERR(rdev->regs)) {
		ret = PTR_ERR(rdev->regs);
		dev_err(&pdev->dev, "cannot map BAR%d: %d\n", RBLN_BAR_REGS, ret);
		return ret;
	}
	ret = rbln_pcim_request_region(pdev, RBLN_BAR_MEM, RBLN_DRIVER_NAME);
	if (ret) {
		dev_err(&pdev->dev, "cannot claim BAR%d: %d\n", RBLN_BAR_MEM, ret);
		return ret;
	}
	rdev->ctrl = rbln_pcim_iomap_range(pdev, RBLN_BAR_MEM, 0,
					   RBLN_FW_CTRL_REGION_SIZE);
	if (IS_ERR(rdev->ctrl)) {
		ret = PTR_ERR(rdev->ctrl);
		dev_err(&pdev->dev, "cannot map the control region of BAR%d: %d\n",
			RBLN_BAR_MEM, ret);
		return ret;
	}
	return 0;
}

/* MSI-X vector RBLN_FW_IRQ_ADMIN: only wakes the admin waiter. */
static irqreturn_t rbln_pci_admin_irq(int irq, void *arg)
{
	rbln_admin_irq(arg);
	return IRQ_HANDLED;
}

/*
 * MSI-X vector RBLN_FW_IRQ_RING: job completions, consumed in hard-irq
 * context (fences may be signalled there; a thread would add a wake-up and
 * a context switch to every job).
 */
static irqreturn_t rbln_pci_ring_irq(int irq, void *arg)
{
	rbln_rings_irq(arg);
	return IRQ_HANDLED;
}

/* MSI-X vector RBLN_FW_IRQ_EVENT: the event ring is consumed in a thread. */
static irqreturn_t rbln_pci_event_thread(int irq, void *arg)
{
	rbln_events_process(arg);
	return IRQ_HANDLED;
}

int rbln_pci_setup_irqs(struct rbln_device *rdev)
{
	struct pci_dev *pdev = rdev->pdev;
	struct device *dev = &pdev->dev;
	const char *name_admin, *name_event;
	int nvec, ret;

	/* MSI-X messages are DMA writes: without bus mastering none arrives. */
	pci_set_master(pdev);

	ret = dma_set_mask_and_coherent(dev, DMA_BIT_MASK(64));
	if (ret) {
		dev_err(dev, "no usable 64-bit DMA: %d\n", ret);
		return ret;
	}
	/*
	 * The card reaches host memory through its own MMU, page by page: a
	 * DMA segment may be as long as the DMA API allows (without this the
	 * PCI default of 64 KiB applies, and 2 MiB huge pages break it).
	 */
	dma_set_max_seg_size(dev, UINT_MAX);

	nvec = pci_alloc_irq_vectors(pdev, RBLN_FW_MIN_VECTORS,
				     rdev->id.num_vectors, PCI_IRQ_MSIX);
	if (nvec < 0) {
		dev_err(dev, "cannot enable MSI-X (card raises %u vectors, driver needs %u): %d\n",
			rdev->id.num_vectors, RBLN_FW_MIN_VECTORS, nvec);
		return nvec;
	}

	name_admin = devm_kasprintf(dev, GFP_KERNEL, "rbln-admin@%s",
				    pci_name(pdev));
	name_event = devm_kasprintf(dev, GFP_KERNEL, "rbln-event@%s",
				    pci_name(pdev));
	if (!name_admin || !name_event)
		return -ENOMEM;

	rdev->irqs.admin = pci_irq_vector(pdev, RBLN_FW_IRQ_ADMIN);
	rdev->irqs.event = pci_irq_vector(pdev, RBLN_FW_IRQ_EVENT);
	if (rdev->irqs.admin < 0 || rdev->irqs.event < 0)
		return -EINVAL;

	ret = devm_request_irq(dev, rdev->irqs.admin, rbln_pci_admin_irq, 0,
			       name_admin, rdev);
	if (ret) {
		dev_err(dev, "cannot request the admin interrupt: %d\n", ret);
		return ret;
	}
	ret = devm_request_threaded_irq(dev, rdev->irqs.event, NULL,
					rbln_pci_event_thread, IRQF_ONESHOT,
					name_event, rdev);
	if (ret) {
		dev_err(dev, "cannot request the event interrupt: %d\n", ret);
		devm_free_irq(dev, rdev->irqs.admin, rdev);
		return ret;
	}
	/*
	 * Command rings need a third vector and firmware-iface 1.2; a card
	 * without them still serves memory and telemetry.
	 */
	if (nvec >= RBLN_FW_RING_VECTORS && rdev->id.iface_minor >= 2) {
		const char *name_ring = devm_kasprintf(dev, GFP_KERNEL,
							"rbln-ring@%s",
							pci_name(pdev));

		rdev->irqs.ring = pci_irq_vector(pdev, RBLN_FW_IRQ_RING);
		if (!name_ring || rdev->irqs.ring < 0)
			return -ENOMEM;
		ret = devm_request_irq(dev, rdev->irqs.ring, rbln_pci_ring_irq, 0,
				       name_ring, rdev);
		if (ret) {
			dev_err(dev, "cannot request the ring interrupt: %d\n", ret);
			devm_free_irq(dev, rdev->irqs.event, rdev);
			devm_free_irq(dev, rdev->irqs.admin, rdev);
			return ret;
		}
		rdev->irqs.ring_ok = true;
	}
	rdev->irqs.requested = true;
	return 0;
}

/* Waits for running handlers; no handler runs after this returns. */
void rbln_pci_free_irqs(struct rbln_device *rdev)
{
	struct device *dev = &rdev->pdev->dev;

	if (!rdev->irqs.requested)
		return;
	if (rdev->irqs.ring_ok)
		devm_free_irq(dev, rdev->irqs.ring, rdev);
	devm_free_irq(dev, rdev->irqs.event, rdev);
	devm_free_irq(dev, rdev->irqs.admin, rdev);
	rdev->irqs.requested = false;
}

/* Command rings need the ring vector (and firmware-iface 1.2). */
bool rbln_pci_has_ring_irq(struct rbln_device *rdev)
{
	return rdev->irqs.ring_ok;
}

/* Host -> card: (card peer id << 16) | vector to the Doorbell register. */
void rbln_doorbell(struct rbln_device *rdev, u32 vector)
{
	iowrite32((rdev->id.doorbell_peer_id << 16) | vector,
		  rdev->regs + RBLN_REG_DOORBELL);
}
