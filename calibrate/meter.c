#include "meter.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool read_double(const char *path, double *out)
{
	FILE *f = fopen(path, "r");
	bool ok;

	if (!f)
		return false;
	ok = fscanf(f, "%lf", out) == 1;
	fclose(f);
	return ok;
}

/* NVML's device at PCI bus id bus (the one the CUDA backend runs on: NVML's
 * index order is not CUDA's, and CUDA_VISIBLE_DEVICES renumbers CUDA's). */
static void open_nvml(struct meter *m, const char *bus)
{
	int (*init)(void);
	int (*handle)(const char *, void **);

	if (!bus || !*bus) {
		snprintf(m->what, sizeof(m->what), "no NVML device (the backend gave no PCI bus id)");
		return;
	}
	m->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!m->lib) {
		snprintf(m->what, sizeof(m->what), "no NVML (libnvidia-ml.so.1 not found)");
		return;
	}
	*(void **)&init = dlsym(m->lib, "nvmlInit_v2");
	*(void **)&handle = dlsym(m->lib, "nvmlDeviceGetHandleByPciBusId_v2");
	*(void **)&m->nvml_energy = dlsym(m->lib, "nvmlDeviceGetTotalEnergyConsumption");
	*(void **)&m->nvml_shutdown = dlsym(m->lib, "nvmlShutdown");
	/* NVML calls return 0 (NVML_SUCCESS) on success */
	if (!init || !handle || !m->nvml_energy || init() != 0 ||
	    handle(bus, &m->dev) != 0) {
		snprintf(m->what, sizeof(m->what), "NVML present but no energy counter for device %s",
			 bus);
		dlclose(m->lib);
		m->lib = NULL;
		return;
	}
	m->kind = METER_NVML;
	snprintf(m->what, sizeof(m->what), "NVML total energy, device %s", bus);
}

static void open_rapl(struct meter *m, const char *root)
{
	char p[300];
	double v;

	snprintf(m->path, sizeof(m->path), "%s/intel-rapl:0/energy_uj",
		 root ? root : "/sys/class/powercap");
	snprintf(p, sizeof(p), "%s/intel-rapl:0/max_energy_range_uj",
		 root ? root : "/sys/class/powercap");
	if (!read_double(m->path, &v)) {
		snprintf(m->what, sizeof(m->what), "no RAPL (%s not readable)", m->path);
		return;
	}
	if (!read_double(p, &m->max_range_uj))
		m->max_range_uj = 0;
	m->kind = METER_RAPL;
	snprintf(m->what, sizeof(m->what), "RAPL package-0 (powercap)");
}

void meter_open(struct meter *m, const char *backend, const char *pci_bus_id,
		const char *rapl_root)
{
	memset(m, 0, sizeof(*m));
	if (backend && !strcmp(backend, "cuda"))
		open_nvml(m, pci_bus_id);
	else
		open_rapl(m, rapl_root);
}

void meter_close(struct meter *m)
{
	if (m->kind == METER_NVML) {
		if (m->nvml_shutdown)
			m->nvml_shutdown();
		dlclose(m->lib);
	}
	memset(m, 0, sizeof(*m));
}

bool meter_read(struct meter *m, double *joules)
{
	unsigned long long mj;
	double uj;

	switch (m->kind) {
	case METER_NVML:
		if (m->nvml_energy(m->dev, &mj) != 0)
			return false;
		*joules = (double)mj * 1e-3;
		return true;
	case METER_RAPL:
		if (!read_double(m->path, &uj))
			return false;
		*joules = uj * 1e-6;
		return true;
	default:
		return false;
	}
}

double meter_delta(const struct meter *m, double before, double after)
{
	double d = after - before;

	if (d < 0 && m->kind == METER_RAPL && m->max_range_uj > 0)
		d += m->max_range_uj * 1e-6;   /* the counter wrapped once */
	return d;
}
