# Exit codes, command by command (README, docs/servesim.1.md EXIT STATUS):
# 2 for a bad command line (an unknown command or option, an unknown name,
# a bad value, options that conflict), 1 for a bad input file or a failed
# run, each with one line on stderr naming what was wrong.  One row per
# class per command; nothing here simulates more than a few requests.
. "$(dirname "$0")/cli-lib.sh"

printf 'TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:47.0,12\n' >"$T/bad.csv"
printf 'x,y\n1,2\n' >"$T/junk.csv"
printf 'not a database\n' >"$T/junk.db"
mkdir -p "$T/empty" "$T/notrun"
W="--arrival poisson:rate=5 --lengths fixed:prompt=8,output=2 --num-requests 3"

# STATUS|PATTERN|ARGS (split on spaces; $T and $W expanded)
while IFS='|' read -r st pat args; do
	case $st in ''|'#'*) continue ;; esac
	eval "set -- $args"
	expect_error "$st" "$pat" -- "$@"
done <<TABLE
# the top level
2|^servesim: unknown command 'fly'|fly
2|^servesim: no such command 'fly'|help fly
2|^servesim: version: unexpected argument 'now'|version now
2|^servesim: -q and -v: expected one of them|help -q -v run
2|^servesim: help --man: expected run, live, plan, sweep or loop, got 'list'|help --man list
2|^servesim: --data-dir: expected a directory, got '$T/nope'\$|--data-dir $T/nope list gpus
1|^servesim: $T/empty/models.json: cannot open|--data-dir $T/empty list gpus
# run: unknown option, unknown name, bad value, conflict, -q with -v; bad file
2|^servesim: unknown option '--bogus'|run --bogus
2|^servesim: unknown model 'gpt-9'|run --model gpt-9
2|^servesim: --engine: unknown engine 'nope'|run --engine nope
2|^servesim: --format: unknown format 'nope'|run --format nope --trace $T/bad.csv
2|^servesim: --tp: expected an integer in 1..64, got '0'\$|run --tp 0
2|^servesim: --arrival poisson: expected a number for 'rate', got 'x'\$|run --arrival poisson:rate=x --lengths fixed:prompt=1,output=1 --num-requests 3
2|^servesim: --tenants: expected N|run --tenants abc
2|^servesim: --prefill-instances and --decode-instances: expected both|run --prefill-instances 2
2|^servesim: --gpu-memory-utilization and --kv-free-fraction: expected one of them|run --gpu-memory-utilization 0.8 --kv-free-fraction 0.5
2|^servesim: -q and -v: expected one of them|run -q -v
2|does not fit on 1 x l40s|run --model llama-3.1-70b --gpu l40s
1|^servesim: $T/bad.csv:3: |run --trace $T/bad.csv
1|^servesim: $T/nosuch.csv: cannot open trace|run --trace $T/nosuch.csv
1|^servesim: $T/nosuch.json: cannot open|run --model-catalog $T/nosuch.json
# live
2|^servesim: unknown option '--engine'|live --engine vllm
2|^servesim: --backend: unknown kernel backend 'nope' \(known: |live --backend nope $W
2|^servesim: unknown model 'gpt-9'|live --model gpt-9
2|^servesim: --threads: expected an integer in 1..1024, got '0'\$|live --threads 0
2|^servesim: -q and -v: expected one of them|live -v -q
1|^servesim: $T/bad.csv:3: |live --trace $T/bad.csv
# plan
2|^servesim: unknown option '--max-g'|plan --max-g 8
2|^servesim: --gpus: unknown GPU 'tpu'|plan --gpus tpu $W
2|^servesim: --policies: expected names among|plan --policies magic $W
2|^servesim: --tp: expected integers in 1..64|plan --tp x $W
2|^servesim: --arrival poisson: expected a number for 'rate'|plan --arrival poisson:rate=x --lengths fixed:prompt=1,output=1 --num-requests 3
2|^servesim: -q and -v: expected one of them|plan -q -v
1|^servesim: $T/bad.csv:3: |plan --trace $T/bad.csv
# compare
2|^servesim: unknown option '--bogus'|compare --bogus a b
2|^servesim: compare: expected two or more result directories, got 1\$|compare a
2|^servesim: --reference '9': expected a run's name|compare --reference 9 a b
2|^servesim: --label: given 1 times for 2 runs|compare --label x a b
2|^servesim: --label: run 1's name has a control character|compare --label "$(printf 'a\tb')" --label c a b
2|^servesim: -q and -v: expected one of them|compare -q -v a b
1|^servesim: $T/notrun/results.db: cannot open|compare $T/notrun $T/empty
# list
2|^servesim: list: expected models, gpus|list planets
2|^servesim: unknown option '--bogus'|list gpus --bogus
2|^servesim: list: expected one topic, got 'gpus' and 'models'\$|list gpus models
2|^servesim: -q and -v: expected one of them|list gpus -q -v
# sweep
2|^servesim: unknown option '--bogus'|sweep --bogus
2|^servesim: --sweep nokey: expected a .servesim run. option as KEY|sweep --sweep nokey=1,2 $W
2|^servesim: rate-scale=x: --rate-scale: expected a factor|sweep --sweep rate-scale=x $W
2|^servesim: policy=magic: --policy: unknown batch policy 'magic'|sweep --sweep policy=magic $W
2|^servesim: -q and -v: expected one of them|sweep -q -v --sweep policy=vllm $W
1|^servesim: policy=vllm: $T/nosuch.csv: cannot open trace|sweep --sweep policy=vllm --trace $T/nosuch.csv
# loop
2|^servesim: loop: expected --out DIR|loop $W
2|^servesim: unknown option '--bogus'|loop --out $T/lx --bogus
2|^servesim: --repeats: expected an integer in 1..100, got '0'\$|loop --out $T/lx --repeats 0 $W
2|^servesim: -q and -v: expected one of them|loop -q -v --out $T/lx $W
1|^servesim: $T/nosuch.db: cannot open calibration store|loop --out $T/lx --calibration $T/nosuch.db $W
# calibrate
2|^servesim: calibrate: expected a subcommand|calibrate
2|^servesim: calibrate: unknown subcommand 'nope'|calibrate nope
2|^servesim: unknown option '--rep' \(did you mean --repeats\?\)\$|calibrate run --rep 3
2|^servesim: --repeats: expected an integer in 1..10000, got '0'\$|calibrate run --repeats 0
2|^servesim: unknown model 'gpt-9'|calibrate run --model gpt-9 --store $T/s.db
2|^servesim: -q and -v: expected one of them|calibrate run -q -v
2|^servesim: --kind: unknown importer 'nope'|calibrate import --kind nope --store $T/s.db $T/junk.csv
2|^servesim: --window: expected an integer|calibrate import --window x $T/junk.csv
2|^servesim: -q and -v: expected one of them|calibrate import -q -v $T/junk.csv
1|^servesim: $T/junk.csv:1: unrecognized header|calibrate import --store $T/s.db $T/junk.csv
2|^servesim: unknown option '--bogus' \\(see \`servesim calibrate list --help\`\\)\$|calibrate list --bogus
1|^servesim: $T/junk.db: not a servesim calibration store|calibrate list --store $T/junk.db
2|^servesim: unknown option '--bogus' \\(see \`servesim calibrate export --help\`\\)\$|calibrate export --bogus
1|^servesim: $T/nosuch.db: cannot open calibration store|calibrate export --store $T/nosuch.db
2|^servesim: --folds: expected an integer 2..100, got '1'\$|calibrate check --folds 1
2|^servesim: unexpected argument 'x' \\(see \`servesim calibrate check --help\`\\)\$|calibrate check x
2|^servesim: -q and -v: expected one of them|calibrate check -q -v
1|^servesim: $T/junk.db: not a servesim calibration store|calibrate check --store $T/junk.db
2|^servesim: --engine: unknown engine 'nope'|calibrate fit-engine --engine nope $T/junk.csv
2|^servesim: --jobs: expected an integer in 1..64, got '0'\$|calibrate fit-engine --jobs 0 $T/junk.csv
2|^servesim: calibrate fit-engine: expected at least one RESULT file|calibrate fit-engine
1|^servesim: $T/junk.csv:1: unrecognized result|calibrate fit-engine $T/junk.csv
TABLE
finish
