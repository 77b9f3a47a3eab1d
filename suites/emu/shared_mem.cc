/* shared_mem.cc — shared memory is garbage at block start on the emulated device, as on a GPU
 * (emu.h: poison_shared). cuda_emu.h makes each __shared__ variable a function-local `static
 * thread_local` (per-OS-thread storage is per-block storage: exec.cc runs one block at a time
 * per OS thread) and declares a one-byte tag beside it, `tdm_emu_shm_tag_<n>`. Without more,
 * such storage starts zeroed and then holds what the previous block left, so a kernel that reads
 * shared memory before writing it passes here and fails on a GPU.
 *
 * How the variables are found. g++ puts a template's local statics in COMDAT sections of their
 * own and ignores a section attribute on them (all of tandem's kernels are templates), so no
 * linker section can gather them. The program's symbol table can: a function-local static of
 * function F is the symbol `_ZZ<F's encoding>E<length><name>[discriminator]`, so the tags give the
 * prefixes `_ZZ<F>E` of the functions that have shared memory (kernels and __device__ helpers:
 * device code has no other statics), and every STT_TLS symbol with such a prefix is shared
 * memory. In an executable an STT_TLS symbol's value is its offset in the TLS segment; the
 * marker below (a TLS symbol of known name) turns offsets into this OS thread's addresses. The
 * scan runs once, at the first block; the ranges are merged, so a block costs a few memsets of
 * the few tens of KiB that all kernels' shared memory takes together (one block runs per OS
 * thread, so filling the other kernels' variables too is harmless).
 *
 * Should the scan fail (no /proc/self/exe, a stripped program), it says so once on stderr and
 * shared memory keeps its old behaviour (not garbage). */
#include "emu.h"

#include <ctype.h>
#include <elf.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

// The marker: its address on a thread minus its symbol's value is that thread's TLS segment.
extern "C" {
thread_local char tdm_emu_shm_marker;
}

namespace tdm_emu {
namespace {

struct shm_range {
    size_t off, size;   // in the TLS segment
    size_t before;      // bytes of the ranges before it (shared_index)
};

std::vector<shm_range> *g_ranges;   // merged, by offset; empty when the scan failed
size_t g_marker_off;                // the marker's offset in the TLS segment
std::once_flag g_scan_once;

const char kTag[] = "tdm_emu_shm_tag_";

struct tls_symbol {
    std::string name;
    size_t value, size;
};

// The executable's STT_TLS symbols (.symtab), its TLS segment's size in *tls_size, or a reason.
const char *read_tls_symbols(std::vector<tls_symbol> &out, size_t *tls_size) {
    const int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return "cannot open /proc/self/exe";
    struct stat st;
    if (fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof(Elf64_Ehdr)) {
        close(fd);
        return "cannot read /proc/self/exe";
    }
    const size_t len = (size_t)st.st_size;
    void *map = mmap(nullptr, len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return "cannot map /proc/self/exe";
    const char *b = (const char *)map;
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)b;
    const char *why = nullptr;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_shoff + (size_t)eh->e_shnum * sizeof(Elf64_Shdr) > len ||
        eh->e_phoff + (size_t)eh->e_phnum * sizeof(Elf64_Phdr) > len)
        why = "not a 64-bit ELF file it can read";
    *tls_size = 0;
    for (int i = 0; !why && i < eh->e_phnum; i++) {
        const Elf64_Phdr *ph = (const Elf64_Phdr *)(b + eh->e_phoff) + i;
        if (ph->p_type == PT_TLS) *tls_size = ph->p_memsz;
    }
    bool symtab = false;
    const Elf64_Shdr *sh = why ? nullptr : (const Elf64_Shdr *)(b + eh->e_shoff);
    for (int i = 0; !why && i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum) continue;
        const Elf64_Shdr &strs = sh[sh[i].sh_link];
        if (sh[i].sh_offset + sh[i].sh_size > len || strs.sh_offset + strs.sh_size > len) break;
        symtab = true;
        const Elf64_Sym *sym = (const Elf64_Sym *)(b + sh[i].sh_offset);
        for (size_t k = 0; k < sh[i].sh_size / sizeof(Elf64_Sym); k++) {
            if (ELF64_ST_TYPE(sym[k].st_info) != STT_TLS || sym[k].st_name >= strs.sh_size)
                continue;
            const char *name = b + strs.sh_offset + sym[k].st_name;
            out.push_back({std::string(name, strnlen(name, strs.sh_size - sym[k].st_name)),
                           (size_t)sym[k].st_value, (size_t)sym[k].st_size});
        }
    }
    if (!why && !symtab) why = "the program has no symbol table (stripped?)";
    munmap(map, len);
    return why;
}

// The prefix `_ZZ<F>E` of a tag's symbol, or "" when `name` is not a tag.
std::string tag_prefix(const std::string &name) {
    const size_t p = name.find(kTag);
    if (p == std::string::npos || name.compare(0, 3, "_ZZ") != 0) return "";
    size_t q = p;   // back over the length of the tag's name
    while (q > 0 && isdigit((unsigned char)name[q - 1])) q--;
    return q < p && q > 3 && name[q - 1] == 'E' ? name.substr(0, q) : "";
}

void scan() {
    g_ranges = new std::vector<shm_range>;   // never freed: blocks run until the process ends
    std::vector<tls_symbol> syms;
    size_t tls_size = 0;
    const char *why = read_tls_symbols(syms, &tls_size);
    const tls_symbol *marker = nullptr;
    std::vector<std::string> prefixes;
    for (const tls_symbol &s : syms) {
        if (s.name == "tdm_emu_shm_marker") marker = &s;
        std::string p = tag_prefix(s.name);
        if (!p.empty()) prefixes.push_back(p);
    }
    if (!why && !marker) why = "its marker symbol is missing";
    std::vector<shm_range> r;
    for (const tls_symbol &s : syms) {
        if (why || s.size == 0 || s.name.find(kTag) != std::string::npos) continue;
        for (const std::string &p : prefixes)
            if (s.name.size() > p.size() && s.name.compare(0, p.size(), p) == 0 &&
                isdigit((unsigned char)s.name[p.size()])) {
                if (s.value + s.size > tls_size) {
                    why = "a symbol lies outside the TLS segment";
                    break;
                }
                r.push_back({s.value, s.size, 0});
                break;
            }
    }
    if (why) {
        fprintf(stderr, "tandem emu: cannot find the __shared__ variables (%s): shared memory is "
                        "not filled with garbage at block start\n", why);
        return;
    }
    std::sort(r.begin(), r.end(), [](const shm_range &a, const shm_range &b) {
        return a.off < b.off;
    });
    for (const shm_range &x : r) {
        if (!g_ranges->empty() && g_ranges->back().off + g_ranges->back().size >= x.off)
            g_ranges->back().size =
                std::max(g_ranges->back().size, x.off + x.size - g_ranges->back().off);
        else
            g_ranges->push_back(x);
    }
    size_t before = 0;
    for (shm_range &x : *g_ranges) {
        x.before = before;
        before += x.size;
    }
    g_marker_off = marker->value;
}

}  // namespace

void poison_shared() {
    std::call_once(g_scan_once, scan);
    char *const seg = (char *)((uintptr_t)&tdm_emu_shm_marker - g_marker_off);   // this thread's
    for (const shm_range &x : *g_ranges) memset(seg + x.off, 0xFF, x.size);
}

long shared_index(const void *p) {
    if (!g_ranges || g_ranges->empty()) return -1;
    const uintptr_t seg = (uintptr_t)&tdm_emu_shm_marker - g_marker_off;
    const uintptr_t u = (uintptr_t)p;
    if (u < seg) return -1;
    const size_t off = u - seg;
    auto it = std::upper_bound(g_ranges->begin(), g_ranges->end(), off,
                               [](size_t o, const shm_range &r) { return o < r.off; });
    if (it == g_ranges->begin()) return -1;
    --it;
    if (off >= it->off + it->size) return -1;
    return (long)(it->before + (off - it->off));
}

bool shared_address(const void *p) {
    return shared_index(p) >= 0;
}

size_t shared_total() {
    return g_ranges && !g_ranges->empty() ? g_ranges->back().before + g_ranges->back().size : 0;
}

}  // namespace tdm_emu
