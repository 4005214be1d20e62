/* servesim — fuzz target: a model catalog (neither defined), a GPU catalog
 * (FUZZ_GPUS) or an engine catalog (FUZZ_ENGINES) loaded by sim/catalog.c,
 * or a Hugging Face config.json read by sim/model-config.c (FUZZ_HF_CONFIG). */
#include "fuzz.h"

#include "catalog.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_file("catalog.json", data, size);
	struct ss_error err = { 0 };
	struct catalog c;
	int rc;

	catalog_init(&c);
#if defined(FUZZ_HF_CONFIG)
	{
		struct model_spec m;

		rc = model_from_hf_config(&m, path, NULL, &err);
		if (!rc) {
			/* what a deployment derives from it stays finite */
			if (!(model_params(&m) > 0) || !(model_kv_bytes_for_tokens(&m, 1e6) >= 0))
				__builtin_trap();
		}
	}
#elif defined(FUZZ_GPUS)
	rc = catalog_load_gpus(&c, path, &err);
#elif defined(FUZZ_ENGINES)
	rc = catalog_load_engines(&c, path, &err);
#else
	rc = catalog_load_models(&c, path, &err);
#endif
	fuzz_check_error(rc, &err);
	catalog_release(&c);
	return 0;
}
