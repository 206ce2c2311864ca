# bench/lib/capped.sh — shell helpers shared by the memory-capped
# benchmarks (sourced, not run): a cgroup-v1 memory cap for one command,
# dropping the page cache, reading key=value fields, and the bench16 model
# converted once per expert type.
#
# After sourcing, call cap_init NAME once (NAME prefixes messages and the
# child cgroups). Needs root for cgroups and drop_caches; without them the
# helpers say so once and run uncapped / without dropping.

# cap_init NAME: finds the writable cgroup-v1 memory controller of this
# shell (CAP_PARENT, empty when there is none).
cap_init() {
    CAP_NAME=$1
    CAP_PARENT=""
    local memcg
    memcg=$(awk -F: '$2=="memory"{print $3}' /proc/self/cgroup 2>/dev/null || true)
    if [ -n "$memcg" ] && [ -w "/sys/fs/cgroup/memory$memcg" ]; then
        CAP_PARENT=/sys/fs/cgroup/memory${memcg%/}
    else
        echo "$CAP_NAME: no writable cgroup-v1 memory controller: runs are NOT capped" >&2
    fi
}

# disk_of PATH: the name of the disk holding PATH ("vda" for /dev/vda1).
disk_of() {
    local src disk
    src=$(df --output=source "$1" | tail -1)
    disk=$(lsblk -no PKNAME "$src" 2>/dev/null | head -1)
    echo "${disk:-$(basename "$src")}"
}

# disk_throttle_init PATH BPS: from now on run_capped also caps the read
# rate of the disk holding PATH at BPS bytes per second (cgroup-v1 blkio
# throttle, O_DIRECT and io_uring reads included; BPS empty or 0: no cap).
# For comparisons within one engine whose runs would otherwise follow the
# disk's drift (this VM's disk reads 1.4-2.4 GB/s, drifting within
# seconds): a rate below the disk's slowest makes the disk the same for
# every run. Sets CAP_BLK_PARENT and CAP_BLK_RULE ("MAJ:MIN BPS"), or says
# why not and leaves them empty.
disk_throttle_init() {
    local path=$1 bps=${2:-} disk blkcg
    CAP_BLK_PARENT="" CAP_BLK_RULE=""
    [ -n "$bps" ] && [ "$bps" != 0 ] || return 0
    disk=$(disk_of "$path")
    blkcg=$(awk -F: '$2=="blkio"{print $3}' /proc/self/cgroup 2>/dev/null || true)
    if [ -z "$blkcg" ] || [ ! -w "/sys/fs/cgroup/blkio${blkcg%/}/cgroup.procs" ] || [ ! -b "/dev/$disk" ]; then
        echo "$CAP_NAME: no writable cgroup-v1 blkio controller or no disk for $path: reads are NOT throttled" >&2
        return 0
    fi
    CAP_BLK_PARENT=/sys/fs/cgroup/blkio${blkcg%/}
    CAP_BLK_RULE="$(lsblk -dno MAJ:MIN "/dev/$disk" | tr -d ' ') $bps"
    echo "$CAP_NAME: reads of /dev/$disk throttled to $bps bytes/s (blkio $CAP_BLK_RULE)" >&2
}

# drop_caches: sync and drop the page cache, so that the next run is cold.
drop_caches() {
    sync
    if ! echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; then
        echo "$CAP_NAME: cannot drop the page cache (not root?): 'cold' runs are not cold" >&2
    fi
}

# run_capped LIMIT_BYTES LOG CMD...: runs CMD in a fresh child cgroup with
# memory.limit_in_bytes = LIMIT (LIMIT 0: no cap), and in a fresh blkio
# child with the read-rate cap when disk_throttle_init set one; stdout to LOG.out,
# stderr to LOG.err, the exit status to LOG.rc; prints the OOM-kill count
# of the cgroup (0 when uncapped). The cgroup starts empty, so page cache
# charged to earlier runs is not counted against this one (but can still
# be hit: drop_caches first for a cold run).
run_capped() {
    local limit=$1 log=$2 rc=0 blk=""
    shift 2
    if [ -n "${CAP_BLK_RULE:-}" ]; then # the read-rate cap of disk_throttle_init
        blk=$CAP_BLK_PARENT/$CAP_NAME-blk-$$-$RANDOM
        mkdir "$blk"
        echo "$CAP_BLK_RULE" >"$blk/blkio.throttle.read_bps_device"
    fi
    if [ -z "$CAP_PARENT" ] || [ "$limit" = 0 ]; then
        (if [ -n "$blk" ]; then echo "$BASHPID" >"$blk/cgroup.procs"; fi && exec "$@") >"$log.out" 2>"$log.err" || rc=$?
        echo "$rc" >"$log.rc"
        [ -z "$blk" ] || rmdir "$blk" 2>/dev/null || true
        echo 0
        return
    fi
    local cg=$CAP_PARENT/$CAP_NAME-$$-$RANDOM sampler=""
    mkdir "$cg"
    echo "$limit" >"$cg/memory.limit_in_bytes"
    rm -f "$log.rc" "$log.io"
    if [ -n "${CAP_SAMPLE_IO:-}" ]; then
        sample_io "$cg" "$log" &
        sampler=$!
    fi
    (echo "$BASHPID" >"$cg/cgroup.procs" && if [ -n "$blk" ]; then echo "$BASHPID" >"$blk/cgroup.procs"; fi &&
        exec "$@") >"$log.out" 2>"$log.err" || rc=$?
    echo "$rc" >"$log.rc"
    [ -z "$blk" ] || rmdir "$blk" 2>/dev/null || true
    [ -z "$sampler" ] || wait "$sampler" || true
    local oom
    oom=$(awk '$1=="oom_kill"{print $2}' "$cg/memory.oom_control" 2>/dev/null || echo 0)
    # pages still charged to the cgroup keep it from being removed at once
    for _ in 1 2 3 4 5; do
        rmdir "$cg" 2>/dev/null && break
        echo 0 >"$cg/memory.force_empty" 2>/dev/null || true
        sleep 0.2
    done
    echo "${oom:-0}"
}

# sample_io CGROUP LOG: until LOG.rc exists, appends "TIME PID READ_BYTES"
# for every process of CGROUP to LOG.io about every 0.2 s (read_bytes of
# /proc/PID/io: what the process made the block layer read, page faults on
# mmapped files included). Used with CAP_SAMPLE_IO=1 by run_capped, so that
# the reads of one phase of a run (e.g. llama-bench's timed decode, the
# last avg_ns before exit) can be told from those of loading.
sample_io() {
    local cg=$1 log=$2 pid b
    while [ ! -f "$log.rc" ]; do
        for pid in $(cat "$cg/cgroup.procs" 2>/dev/null); do
            b=$(awk '$1=="read_bytes:"{print $2}' "/proc/$pid/io" 2>/dev/null) || continue
            [ -n "$b" ] && echo "$(date +%s.%N) $pid $b" >>"$log.io"
        done
        sleep 0.2
    done
}

# median NUMBERS: the median of the space- or newline-separated numbers
# (the lower middle of an even count); nothing when there are none.
median() {
    tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -g | awk '{v[NR] = $1} END {if (NR) print v[int((NR + 1) / 2)]}'
}

# field NAME LINE: the value of NAME=value in a space-separated LINE.
field() {
    sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"
}

# bench16_model PETREL WORK EXPERT_TYPE: prints the path of bench16
# converted with EXPERT_TYPE experts and a q8_0 trunk, converting it first
# when missing (the q4_0 file is bench/stream.sh's $WORK/bench16.gguf; the
# others $WORK/bench16-<type>.gguf). The FP8 source is generated once into
# $WORK/bench16-src and kept for the other types (remove it when done).
# Returns 2 (and prints a message) when Petrel cannot write the type yet,
# 1 on other failures.
bench16_model() {
    local petrel=$1 work=$2 type=$3 out
    if [ "$type" = q4_0 ]; then out=$work/bench16.gguf; else out=$work/bench16-$type.gguf; fi
    if [ -f "$out" ]; then
        echo "$out"
        return 0
    fi
    mkdir -p "$work"
    if [ ! -f "$work/bench16-src/config.json" ] || [ -f "$work/bench16-src.incomplete" ]; then
        local avail_gb
        avail_gb=$(df -BG --output=avail "$work" | tail -1 | tr -dc 0-9)
        if [ "$avail_gb" -lt 40 ]; then
            echo "$CAP_NAME: $work has ${avail_gb} GB free; bench16 needs ~40 GB (22 GB FP8 + 13 GB GGUF)" >&2
            return 1
        fi
        echo "$CAP_NAME: generating bench16 into $work/bench16-src (once)" >&2
        touch "$work/bench16-src.incomplete"
        "$petrel" synth --preset bench16 -o "$work/bench16-src" --quiet >&2 || return 1
        rm -f "$work/bench16-src.incomplete"
    fi
    # the layout plan fails fast (without reading weights) for a type that
    # the converter cannot write yet
    if ! "$petrel" convert --plan "$work/bench16-src" --expert-type "$type" --trunk-type q8_0 >/dev/null 2>&1; then
        echo "$CAP_NAME: petrel convert cannot write $type experts yet: skipping $type" >&2
        return 2
    fi
    # into a temporary name (an interrupted conversion resumes there) that
    # becomes $out only once complete, so that an existing $out is whole
    echo "$CAP_NAME: converting bench16 with $type experts into $out" >&2
    "$petrel" convert "$work/bench16-src" -o "$out.part" --expert-type "$type" --trunk-type q8_0 >/dev/null || {
        echo "$CAP_NAME: converting $type failed" >&2
        return 1
    }
    mv "$out.part" "$out"
    echo "$out"
}
