/* io.h — safetensors files (https://huggingface.co/docs/safetensors): the format of tandem's
 * case files and checkpoints. The reader validates everything before it allocates: a truncated or
 * hostile file gets a one-line error, never a crash or an allocation beyond the file's size.
 * The writer is atomic: it writes a temporary file beside the target, syncs it, then renames it,
 * so a reader never sees a half-written file and an old file survives a failed write. */
#ifndef TANDEM_IO_H
#define TANDEM_IO_H

#include "tandem/tandem.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tdm_safetensors tdm_safetensors;

tdm_safetensors *tdm_safetensors_open(const char *path);   // NULL + error when invalid
void tdm_safetensors_close(tdm_safetensors *st);
int tdm_safetensors_count(const tdm_safetensors *st);
const char *tdm_safetensors_name(const tdm_safetensors *st, int i);
bool tdm_safetensors_has(const tdm_safetensors *st, const char *name);
// Reads one tensor onto `dev` (in its stored dtype). NULL + error when absent or unreadable.
tdm_tensor *tdm_safetensors_get(const tdm_safetensors *st, const char *name, tdm_device dev);
// A __metadata__ value, or NULL when absent.
const char *tdm_safetensors_metadata(const tdm_safetensors *st, const char *key);

// Writes n tensors (any device) under their names, with n_meta key/value metadata pairs
// (meta[2i] the key, meta[2i+1] the value). Atomic (temp file + fsync + rename).
tdm_status tdm_safetensors_save(const char *path, int n, const char *const *names,
                                const tdm_tensor *const *tensors, int n_meta,
                                const char *const *meta);

#ifdef __cplusplus
}
#endif

#endif
