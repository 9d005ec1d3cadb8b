# labbase-compat.sh - a stand-in for the hygiene functions lab/lib.sh is
# getting (CPUs, repeats, measured runs), sourced only where lib.sh does not
# define them yet. Same names and effects, fewer records; removed once the
# shared ones are merged.
lab_cpus() {
    SERVER_CPUS=${SERVER_CPUS:-0}
    if [ "$(nproc)" -ge 2 ]; then LOAD_CPUS=${LOAD_CPUS:-1-$(( $(nproc) - 1 ))}; else LOAD_CPUS=${LOAD_CPUS:-0}; fi
    if [ "${QUICK:-0}" = 1 ]; then REPEATS=${REPEATS:-2}; LAB_SECS=${LAB_SECS:-2}
    else REPEATS=${REPEATS:-5}; LAB_SECS=${LAB_SECS:-10}; fi
}
on_load_cpus() { taskset -c "$LOAD_CPUS" "$@"; }
srv_cpu_total() {  # utime+stime+cutime+cstime ticks of the server's processes
    local p t=0 f
    for p in $(srv_pids "$1"); do
        f=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null) || continue
        set -- $f
        t=$(( t + ${12} + ${13} + ${14} + ${15} ))
    done
    echo "$t"
}
declare -A M_SRV_CPU_S=()
lab_measure() {  # lab_measure LABEL CMD...: CMD on the load CPUs; M_SECS, M_SRV_CPU_S[NAME]
    local label=$1 rc=0 s0 s1 n; shift
    declare -A t0=()
    for n in "${!SRV_PID[@]}"; do t0[$n]=$(srv_cpu_total "$n"); done
    s0=$(date +%s.%N)
    on_load_cpus "$@" || rc=$?
    s1=$(date +%s.%N)
    M_SECS=$(awk -v a="$s0" -v b="$s1" 'BEGIN {printf "%.3f", b - a}')
    for n in "${!t0[@]}"; do
        M_SRV_CPU_S[$n]=$(awk -v t=$(( $(srv_cpu_total "$n") - ${t0[$n]} )) -v hz="$CLK_TCK" 'BEGIN {printf "%.2f", t / hz}')
    done
    return $rc
}
lab_record() {
    printf '{"label":"%s","rep":%s,"value":%s,"unit":"%s"}\n' "$1" "${REP:-null}" "${2:-null}" "${3:-}" >> "$OUT/raw/measures.jsonl"
}
lab_repeat() { local r; for r in $(seq "$REPEATS"); do REP=$r; export REP; "$@"; done; unset REP; }
lab_summary_head() { "$PYTHON" "$LAB_DIR/src/dynamic/verdict_fallback.py" "$OUT"; }
lab_cpus
