# Sourced by the recipes: the device, the data-loading workers and the training command.
#
# CPU       1 or 0 chooses; unset: 1 when torch sees no CUDA device
# WORKERS   data-loading workers: none on a CPU (its cores train), else up to 4 within the cores
# train_logged LOG OPTIONS...   fairseq-train with the full log (config dump, model, warnings) in LOG
#           and the rest on the terminal: fairseq's progress bar (--log-format tqdm, with its ETA)
#           on a terminal, plain json lines elsewhere (a --log-format of yours wins)
# drop_interval_checkpoints SAVE_DIR [USER OPTIONS]   after a run, with KEEP=0 (the default): the
#           interval checkpoint fairseq keeps at the least (continued.py passes --keep-interval-updates
#           1), which checkpoint_best.pt and checkpoint_last.pt make needless; none with yours
if [[ -z "${CPU:-}" ]]; then
  CPU=$(python -c 'import torch; print(0 if torch.cuda.is_available() else 1)' 2>/dev/null || echo 1)
  if [[ "$CPU" == "1" ]]; then
    echo "recipe: no CUDA device: the CPU settings (CPU=0 or CPU=1 to choose)" >&2
  fi
fi
if [[ "$CPU" == "1" ]]; then
  WORKERS=${WORKERS:-0}; CPU_FLAG=(--cpu)
else
  CORES=$(nproc 2>/dev/null || echo 1)
  WORKERS=${WORKERS:-$(( CORES - 1 > 4 ? 4 : (CORES > 1 ? CORES - 1 : 0) ))}; CPU_FLAG=()
fi

train_logged() {
  local log=$1; shift
  local format=(--log-format json)
  if [[ -t 1 && -t 2 ]]; then format=(--log-format tqdm); fi
  python -m fairseq_clear.cli.train_log --log "$log" -- "${format[@]}" "$@"
}

drop_interval_checkpoints() {
  local dir=$1; shift
  case "$dir" in -*) dir=./$dir ;; esac  # else read as an option by find
  [[ "${KEEP:-0}" =~ ^0+$ ]] || return 0
  case " $* " in *" --keep-interval-updates"*) return 0 ;; esac  # yours: fairseq keeps what it says
  find "$dir" -maxdepth 1 -regextype posix-extended -regex '.*/checkpoint_[0-9]+_[0-9]+\.pt' -delete
}
