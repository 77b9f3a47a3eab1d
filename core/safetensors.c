/* safetensors.c — the safetensors reader and atomic writer behind case files and checkpoints.
 * Layout: u64 little-endian header length N, N bytes of JSON header, then the data buffer; each
 * header entry gives dtype, shape and [begin, end) offsets into the buffer. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "core/files_impl.h"
#include "core/tensor_impl.h"

#define ST_MAX_HEADER (100u << 20)   // 100 MiB of JSON header is already absurd
#define ST_MAX_TENSORS 4096

typedef struct {
    char *name;
    tdm_dtype dtype;
    int ndim;
    int64_t shape[TDM_MAX_DIMS];
    uint64_t begin, end;   // offsets into the data buffer
} st_entry;

struct tdm_safetensors {
    char *path;
    FILE *f;
    uint64_t data_start, data_size;
    st_entry *entries;
    int n;
    cJSON *metadata;   // the __metadata__ object, or NULL
};

static const struct {
    const char *name;
    tdm_dtype dtype;
} st_dtypes[] = {{"F32", TDM_DTYPE_F32}, {"F16", TDM_DTYPE_F16}, {"BF16", TDM_DTYPE_BF16},
                 {"F64", TDM_DTYPE_F64}, {"I32", TDM_DTYPE_I32}, {"I64", TDM_DTYPE_I64},
                 {"BOOL", TDM_DTYPE_BOOL}};

static const char *st_dtype_name(tdm_dtype dt) {
    for (size_t i = 0; i < sizeof st_dtypes / sizeof *st_dtypes; i++)
        if (st_dtypes[i].dtype == dt) return st_dtypes[i].name;
    return NULL;
}

static tdm_status st_fail(tdm_safetensors *st, const char *path, const char *fmt,
                          const char *detail) {
    char msg[600];
    snprintf(msg, sizeof msg, fmt, detail ? detail : "");
    tdm_safetensors_close(st);
    return tdm_error_set(TDM_ERR_FORMAT, "%s: %s", path, msg);
}

// Validates one header entry ("name": {"dtype", "shape", "data_offsets"}).
static tdm_status st_parse_entry(const cJSON *item, uint64_t data_size, st_entry *e,
                                 char *why, size_t nwhy) {
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(item, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(item, "shape");
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
    if (!cJSON_IsObject(item) || !cJSON_IsString(dt) || !cJSON_IsArray(shape) ||
        !cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2) {
        snprintf(why, nwhy, "tensor '%s': needs dtype, shape and data_offsets [begin, end]",
                 item->string);
        return TDM_ERR_FORMAT;
    }
    size_t k;
    for (k = 0; k < sizeof st_dtypes / sizeof *st_dtypes; k++)
        if (!strcmp(dt->valuestring, st_dtypes[k].name)) break;
    if (k == sizeof st_dtypes / sizeof *st_dtypes) {
        snprintf(why, nwhy,
                 "tensor '%s': unsupported dtype '%.16s' (F32 F16 BF16 F64 I32 I64 BOOL)",
                 item->string, dt->valuestring);
        return TDM_ERR_FORMAT;
    }
    e->dtype = st_dtypes[k].dtype;
    e->ndim = cJSON_GetArraySize(shape);
    if (e->ndim > TDM_MAX_DIMS) {
        snprintf(why, nwhy, "tensor '%s': %d dims (at most %d)", item->string, e->ndim,
                 TDM_MAX_DIMS);
        return TDM_ERR_FORMAT;
    }
    // numel * size must not overflow and must equal end - begin.
    uint64_t bytes = tdm_dtype_size(e->dtype);
    bool too_big = false;
    for (int d = 0; d < e->ndim; d++) {
        const cJSON *s = cJSON_GetArrayItem(shape, d);
        if (!cJSON_IsNumber(s) || s->valuedouble < 0 || s->valuedouble > 9.0e15 ||
            s->valuedouble != (double)(int64_t)s->valuedouble) {
            snprintf(why, nwhy, "tensor '%s': shape entries must be non-negative integers",
                     item->string);
            return TDM_ERR_FORMAT;
        }
        e->shape[d] = (int64_t)s->valuedouble;
        if (e->shape[d] && bytes > UINT64_MAX / (uint64_t)e->shape[d]) too_big = true;
        else bytes *= (uint64_t)e->shape[d];
    }
    double b = cJSON_GetArrayItem(offs, 0)->valuedouble, en = cJSON_GetArrayItem(offs, 1)->valuedouble;
    if (!cJSON_IsNumber(cJSON_GetArrayItem(offs, 0)) || !cJSON_IsNumber(cJSON_GetArrayItem(offs, 1)) ||
        b < 0 || en < b || en > (double)data_size || b != (double)(uint64_t)b ||
        en != (double)(uint64_t)en) {
        snprintf(why, nwhy, "tensor '%s': data_offsets [%.0f, %.0f] outside the %llu-byte data",
                 item->string, b, en, (unsigned long long)data_size);
        return TDM_ERR_FORMAT;
    }
    e->begin = (uint64_t)b;
    e->end = (uint64_t)en;
    if (too_big || bytes != e->end - e->begin) {
        snprintf(why, nwhy, "tensor '%s': shape needs %s bytes but data_offsets give %llu",
                 item->string, too_big ? "too many" : "a different number of",
                 (unsigned long long)(e->end - e->begin));
        return TDM_ERR_FORMAT;
    }
    return TDM_OK;
}

static int st_by_offsets(const void *a, const void *b) {
    const st_entry *x = *(const st_entry *const *)a, *y = *(const st_entry *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

// The format requires the tensors to tile the data buffer exactly, as safetensors' own reader
// checks: sorted by offsets, each begins where the previous ended, the first at 0 and the last
// at the buffer's end. Overlapping tensors (two names over the same bytes), gaps and trailing
// bytes all mean a file that was not written as it claims.
static tdm_status st_check_tiling(const tdm_safetensors *st, char *why, size_t nwhy) {
    const st_entry **order = malloc(((size_t)st->n + 1) * sizeof *order);
    if (!order) {
        snprintf(why, nwhy, "out of memory");
        return TDM_ERR_OOM;
    }
    for (int i = 0; i < st->n; i++) order[i] = &st->entries[i];
    qsort(order, (size_t)st->n, sizeof *order, st_by_offsets);
    uint64_t at = 0;
    tdm_status s = TDM_OK;
    for (int i = 0; i < st->n && s == TDM_OK; i++) {
        if (order[i]->begin != at) {
            if (order[i]->begin < at)
                snprintf(why, nwhy, "tensor '%.64s': data_offsets [%llu, %llu] overlap '%.64s' "
                         "(safetensors tensors must tile the data exactly)", order[i]->name,
                         (unsigned long long)order[i]->begin, (unsigned long long)order[i]->end,
                         order[i - 1]->name);
            else
                snprintf(why, nwhy, "tensor '%.64s': data_offsets [%llu, %llu] leave bytes [%llu, "
                         "%llu) unused (safetensors tensors must tile the data exactly)",
                         order[i]->name, (unsigned long long)order[i]->begin,
                         (unsigned long long)order[i]->end, (unsigned long long)at,
                         (unsigned long long)order[i]->begin);
            s = TDM_ERR_FORMAT;
        }
        at = order[i]->end;
    }
    if (s == TDM_OK && at != st->data_size) {
        snprintf(why, nwhy, "the tensors end at byte %llu of the %llu-byte data (safetensors "
                 "tensors must tile the data exactly)", (unsigned long long)at,
                 (unsigned long long)st->data_size);
        s = TDM_ERR_FORMAT;
    }
    free(order);
    return s;
}

tdm_safetensors *tdm_safetensors_open(const char *path) {
    tdm_safetensors *st = calloc(1, sizeof *st);
    if (!st) {
        tdm_error_set(TDM_ERR_OOM, "%s: out of memory", path);
        return NULL;
    }
    st->path = strdup(path);
    // Opened without blocking, and checked to be a regular file before anything is read:
    // fopen of a FIFO waits for a writer forever (a device or a directory is no case either).
    struct stat sb;
    int fd = tdm_file_open_read(path, &sb);
    if (fd < 0 || !(st->f = fdopen(fd, "rb"))) {
        int err = errno;
        if (fd >= 0) close(fd);
        tdm_safetensors_close(st);
        bool type = err == EISDIR || (err >= TDM_EFILE_LINK && err <= TDM_EFILE_SOCKET);
        tdm_error_set(TDM_ERR_IO, "%s: %s%s", path, type ? "" : "cannot open: ",
                      tdm_file_strerror(err));
        return NULL;
    }
    uint64_t fsize = (uint64_t)sb.st_size;
    unsigned char len8[8];
    if (fsize < 8 || fread(len8, 1, 8, st->f) != 8) {
        st_fail(st, path, "truncated: shorter than the 8-byte header length%s", NULL);
        return NULL;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | len8[i];
    if (hlen > ST_MAX_HEADER || hlen > fsize - 8) {
        char d[96];
        snprintf(d, sizeof d, "%llu bytes, file has %llu after the length", (unsigned long long)hlen,
                 (unsigned long long)(fsize - 8));
        st_fail(st, path, "header length beyond the file (%s)", d);
        return NULL;
    }
    char *hdr = malloc(hlen + 1);
    if (!hdr || fread(hdr, 1, hlen, st->f) != hlen) {
        free(hdr);
        st_fail(st, path, "cannot read the header%s", NULL);
        return NULL;
    }
    hdr[hlen] = '\0';
    st->data_start = 8 + hlen;
    st->data_size = fsize - 8 - hlen;
    cJSON *root = cJSON_ParseWithLength(hdr, hlen);
    free(hdr);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        st_fail(st, path, "header is not a JSON object%s", NULL);
        return NULL;
    }
    int count = cJSON_GetArraySize(root);
    if (count > ST_MAX_TENSORS + 1) {
        cJSON_Delete(root);
        st_fail(st, path, "too many tensors in the header%s", NULL);
        return NULL;
    }
    st->entries = calloc((size_t)count + 1, sizeof *st->entries);
    if (!st->entries) {
        cJSON_Delete(root);
        st_fail(st, path, "out of memory%s", NULL);
        return NULL;
    }
    char why[400];
    for (cJSON *item = root->child; item; item = item->next) {
        if (!strcmp(item->string, "__metadata__")) {
            if (!cJSON_IsObject(item)) {
                cJSON_Delete(root);
                st_fail(st, path, "__metadata__ is not an object%s", NULL);
                return NULL;
            }
            for (cJSON *m = item->child; m; m = m->next) {
                if (!cJSON_IsString(m)) {
                    snprintf(why, sizeof why, "__metadata__ value of '%.64s' is not a string",
                             m->string);
                    cJSON_Delete(root);
                    st_fail(st, path, "%s", why);
                    return NULL;
                }
            }
            st->metadata = cJSON_DetachItemViaPointer(root, item);
            break;
        }
    }
    for (cJSON *item = root->child; item; item = item->next) {
        st_entry *e = &st->entries[st->n];
        if (st_parse_entry(item, st->data_size, e, why, sizeof why) != TDM_OK) {
            cJSON_Delete(root);
            st_fail(st, path, "%s", why);
            return NULL;
        }
        e->name = strdup(item->string);
        st->n++;
    }
    cJSON_Delete(root);
    if (st_check_tiling(st, why, sizeof why) != TDM_OK) {
        st_fail(st, path, "%s", why);
        return NULL;
    }
    return st;
}

void tdm_safetensors_close(tdm_safetensors *st) {
    if (!st) return;
    for (int i = 0; i < st->n; i++) free(st->entries[i].name);
    free(st->entries);
    cJSON_Delete(st->metadata);
    if (st->f) fclose(st->f);
    free(st->path);
    free(st);
}

int tdm_safetensors_count(const tdm_safetensors *st) { return st->n; }

const char *tdm_safetensors_name(const tdm_safetensors *st, int i) {
    return i >= 0 && i < st->n ? st->entries[i].name : NULL;
}

static const st_entry *st_find(const tdm_safetensors *st, const char *name) {
    for (int i = 0; i < st->n; i++)
        if (!strcmp(st->entries[i].name, name)) return &st->entries[i];
    return NULL;
}

bool tdm_safetensors_has(const tdm_safetensors *st, const char *name) {
    return st_find(st, name) != NULL;
}

const char *tdm_safetensors_metadata(const tdm_safetensors *st, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(st->metadata, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

tdm_tensor *tdm_safetensors_get(const tdm_safetensors *st, const char *name, tdm_device dev) {
    const st_entry *e = st_find(st, name);
    if (!e) {
        tdm_error_set(TDM_ERR_ARG, "%s: no tensor named '%s'", st->path, name);
        return NULL;
    }
    tdm_tensor *host = tdm_tensor_empty(e->ndim, e->shape, e->dtype, TDM_CPU);
    if (!host) {   // the file and the tensor named with why
        tdm_error_set(tdm_last_status(), "%s: tensor '%s': %s", st->path, name, tdm_last_error());
        return NULL;
    }
    size_t n = (size_t)(e->end - e->begin);
    if (n && (fseeko(st->f, (off_t)(st->data_start + e->begin), SEEK_SET) != 0 ||
              fread(tdm_data(host), 1, n, st->f) != n)) {
        tdm_tensor_free(host);
        tdm_error_set(TDM_ERR_IO, "%s: cannot read tensor '%s'", st->path, name);
        return NULL;
    }
    if (dev.type == TDM_DEVICE_CPU) return host;
    tdm_tensor *t = tdm_tensor_to(host, dev, e->dtype);
    tdm_tensor_free(host);
    return t;
}

// ---- writer ---------------------------------------------------------------------------------

tdm_status tdm_safetensors_save(const char *path, int n, const char *const *names,
                                const tdm_tensor *const *tensors, int n_meta,
                                const char *const *meta) {
    cJSON *root = cJSON_CreateObject();
    if (!root) return tdm_error_set(TDM_ERR_OOM, "%s: out of memory", path);
    if (n_meta > 0) {
        cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
        for (int i = 0; i < n_meta; i++) cJSON_AddStringToObject(m, meta[2 * i], meta[2 * i + 1]);
    }
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        const tdm_tensor *t = tensors[i];
        const char *dt = st_dtype_name(t->dtype);
        if (!dt) {
            cJSON_Delete(root);
            return tdm_error_set(TDM_ERR_DTYPE, "%s: cannot store dtype %s", path,
                                 tdm_dtype_name(t->dtype));
        }
        cJSON *e = cJSON_AddObjectToObject(root, names[i]);
        cJSON_AddStringToObject(e, "dtype", dt);
        cJSON *shape = cJSON_AddArrayToObject(e, "shape");
        for (int d = 0; d < t->ndim; d++)
            cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[d]));
        cJSON *offs = cJSON_AddArrayToObject(e, "data_offsets");
        uint64_t nb = tdm_tensor_nbytes(t);
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(off + nb)));
        off += nb;
    }
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!json) return tdm_error_set(TDM_ERR_OOM, "%s: out of memory", path);
    size_t hlen = strlen(json), padded = (hlen + 7) / 8 * 8;

    char tmp[4200];
    int fd = tdm_file_temp_open(path, tmp, sizeof tmp);   // refuses a link, FIFO, device there
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        int err = errno;
        if (fd >= 0) close(fd), unlink(tmp);
        free(json);
        return tdm_error_set(TDM_ERR_IO, "%s: cannot write: %s", fd >= 0 ? tmp : path,
                             tdm_file_strerror(err));
    }
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    bool ok = fwrite(len8, 1, 8, f) == 8 && fwrite(json, 1, hlen, f) == hlen;
    for (size_t i = hlen; ok && i < padded; i++) ok = fputc(' ', f) != EOF;
    free(json);
    tdm_status s = TDM_OK;
    for (int i = 0; ok && i < n; i++) {
        size_t nb = tdm_tensor_nbytes(tensors[i]);
        void *buf = malloc(nb ? nb : 1);
        if (!buf) {
            s = tdm_error_set(TDM_ERR_OOM, "%s: out of memory", path);
            break;
        }
        s = tdm_tensor_to_host(tensors[i], buf, nb);
        ok = s == TDM_OK && fwrite(buf, 1, nb, f) == nb;
        free(buf);
    }
    ok = ok && s == TDM_OK && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int err = errno;
    if (fclose(f) != 0) ok = false;
    if (!ok || tdm_file_temp_commit(tmp, path) != 0) {
        if (ok) err = errno;
        else unlink(tmp);
        if (s != TDM_OK) return s;
        return tdm_error_set(TDM_ERR_IO, "%s: write failed (%s); the old file, if any, is intact",
                             path, tdm_file_strerror(err));
    }
    return TDM_OK;
}
