/* servesim — energy meters for calibration sweeps.
 *
 * GPU: NVML's total-energy counter (nvmlDeviceGetTotalEnergyConsumption,
 * mJ since driver load), with libnvidia-ml loaded by dlopen at run time so
 * servesim neither links nor needs it.  CPU: RAPL through powercap
 * (/sys/class/powercap/intel-rapl:0/energy_uj, µJ, wrapping at
 * max_energy_range_uj) where it is readable.  Where neither is available the
 * meter is absent and measurements record no energy (NAN), never zero.
 */
#ifndef SS_METER_H
#define SS_METER_H

#include <stdbool.h>

enum meter_kind {
	METER_NONE = 0,
	METER_NVML,
	METER_RAPL,
};

struct meter {
	enum meter_kind kind;
	char what[320];          /* "NVML total energy, device 0000:1B:00.0", "RAPL package-0", or why absent */
	/* NVML */
	void *lib, *dev;
	int (*nvml_energy)(void *dev, unsigned long long *mj);
	int (*nvml_shutdown)(void);
	/* RAPL */
	char path[256];
	double max_range_uj;
};

/* Open the meter for a backend ("cuda": NVML on the device at PCI bus id
 * pci_bus_id, kernel_backend_pci_bus_id's; "cpu": RAPL).  Never fails: an
 * unavailable meter is METER_NONE with the reason in m->what.  rapl_root
 * overrides /sys/class/powercap (tests). */
void meter_open(struct meter *m, const char *backend, const char *pci_bus_id,
		const char *rapl_root);
void meter_close(struct meter *m);
/* Cumulative energy now, J; false when the meter is absent or a read fails. */
bool meter_read(struct meter *m, double *joules);
/* Energy between two reads, J, handling RAPL's counter wrap. */
double meter_delta(const struct meter *m, double before, double after);

#endif
