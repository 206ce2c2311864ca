// cache/hotstore.c — the hot-store's share of the expert budget (see hotstore.h).
#include "cache/hotstore.h"

#include <assert.h>

uint64_t pt_hot_store_bytes(uint64_t eb, uint64_t pin_bytes, uint64_t min_lru, int n_moe, int n_used,
                            int prefetch_depth)
{
    assert(n_moe >= 0 && prefetch_depth >= 0);
    uint64_t pin = pin_bytes;
    const uint64_t nu = n_used > 0 ? (uint64_t)n_used : 1;
    uint64_t keep = min_lru + nu * (uint64_t)(prefetch_depth + 1) * (n_moe ? min_lru / (uint64_t)n_moe : 0);
    if (keep < eb / 8) // (and an eighth of the budget to adapt to new uses)
        keep = eb / 8;
    if (keep > eb / 2) // (a small budget still gets a hot-store when asked)
        keep = eb / 2;
    // Never below what one token needs: its n_used experts in one layer
    // (the LRU slots are shared: the others lend theirs) and one slot in
    // each other layer; less would stall the engine with every slot in use.
    const uint64_t need = min_lru + (nu - 1) * (n_moe ? min_lru / (uint64_t)n_moe : 0);
    if (keep < need)
        keep = need;
    return eb > keep ? (pin < eb - keep ? pin : eb - keep) : 0;
}
