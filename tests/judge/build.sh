#!/usr/bin/env bash
# Build the RocketMQ judge jar: RocketMQ's own store code, compiled from apache/rocketmq source,
# plus mqtool's driver (tests/judge/java/driver or driver533, on tests/judge/java/common's JudgeBase),
# a fastjson stand-in backed by Jackson
# (tests/judge/java/shim) and compile-time stubs for what the judge never runs: JNA, DLedger,
# commons-validator (tests/judge/java/stubs). Only the transitive closure of the driver is compiled
# (javac -sourcepath; the stubs and shim come first on that path and shadow RocketMQ's JNA LibC and
# DLedgerCommitLog).
#
# usage: tests/judge/build.sh ROCKETMQ_GIT_DIR TAG OUTDIR [JARS_DIR]
#   ROCKETMQ_GIT_DIR  a git directory of apache/rocketmq (bare is fine), e.g. /work/.mirror/apache+rocketmq/repo
#   TAG               rocketmq-all-4.9.7 (driver/) or rocketmq-all-5.3.3 (driver533/ + stubs533/)
#   OUTDIR            where rocketmq-judge-<version>.jar is written
#   JARS_DIR          compile-time jars (default: pyspark's jars directory of .venv)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo_root=$(cd "$here/../.." && pwd)
git_dir=${1:?usage: build.sh ROCKETMQ_GIT_DIR TAG OUTDIR [JARS_DIR]}
tag=${2:?usage: build.sh ROCKETMQ_GIT_DIR TAG OUTDIR [JARS_DIR]}
outdir=${3:?usage: build.sh ROCKETMQ_GIT_DIR TAG OUTDIR [JARS_DIR]}
jars=${4:-$("$repo_root/.venv/bin/python" -c 'import pathlib, pyspark; print(pathlib.Path(pyspark.__file__).parent / "jars")')}
version=${tag#rocketmq-all-}
commit=$(git -C "$git_dir" rev-parse "$tag^{commit}")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src" "$work/classes" "$outdir"
outdir=$(cd "$outdir" && pwd)
j="$here/java"
s="$work/src"
case "$version" in
    4.9.7)
        modules="store common remoting logging"
        sourcepath="$j/stubs:$j/shim:$j/driver:$j/common"
        driver="$j/driver/mqtool/judge/Judge.java";;
    5.3.3)
        # 5.x: no logging module (RocketMQ logs through a relocated slf4j: stubs533 forwards it);
        # OpenTelemetry metrics, RocketMQ's own rocksdbjni filter and the 5.x LibC are stubbed too
        modules="store common remoting"
        sourcepath="$j/stubs533:$j/stubs:$j/shim:$j/driver533:$j/common"
        driver="$j/driver533/mqtool/judge/Judge.java";;
    *)
        echo "build.sh: no judge driver for $tag (4.9.7 and 5.3.3 only)" >&2
        exit 2;;
esac
git -C "$git_dir" archive "$tag" $modules LICENSE NOTICE | tar -x -C "$work/src"
for m in $modules; do
    sourcepath="$sourcepath:$s/$m/src/main/java"
done

cp_entries=()
for prefix in commons-lang3- jackson-core- jackson-databind- jackson-annotations- netty-common-4 \
    netty-buffer-4 netty-transport-4 netty-handler-4 netty-codec-4 netty-codec-base- netty-resolver-4 \
    lz4-java- zstd-jni- slf4j-api- guava- failureaccess- rocksdbjni-; do
    found=$(ls "$jars"/"$prefix"*.jar 2>/dev/null | head -1 || true)
    if [ -z "$found" ]; then
        echo "build.sh: no $prefix*.jar in $jars" >&2
        exit 1
    fi
    cp_entries+=("$found")
done
classpath=$(IFS=:; echo "${cp_entries[*]}")
if [ "$version" = 5.3.3 ]; then
    classpath="$jars/*"  # 5.x's closure reaches into more of netty (proxy handlers) and rocksdbjni
fi
javac -nowarn -XDignore.symbol.file -encoding UTF-8 -d "$work/classes" \
    --add-exports java.base/sun.nio.ch=ALL-UNNAMED \
    -sourcepath "$sourcepath" -cp "$classpath" "$driver" 2>&1 | grep -v 'DirectBuffer\|^ *\^\|^import sun\|address()\|warnings\|^Note:' || true
test -f "$work/classes/mqtool/judge/Judge.class"
mkdir -p "$work/classes/META-INF"
cp "$s/LICENSE" "$work/classes/META-INF/LICENSE"
cp "$s/NOTICE" "$work/classes/META-INF/NOTICE"
printf 'RocketMQ store code %s (apache/rocketmq %s) compiled by mqtool tests/judge/build.sh\n' "$tag" "$commit" \
    > "$work/classes/META-INF/mqtool-judge.txt"
jar_path="$outdir/rocketmq-judge-$version.jar"
rm -f "$jar_path"
# sorted entries and a fixed timestamp: the same sources and JDK give the same jar
(cd "$work/classes" && find . -type f | sed 's|^\./||' | LC_ALL=C sort > "$work/files.txt" &&
    jar --create --file "$jar_path" --date=2026-11-23T00:00:00Z @"$work/files.txt")
echo "built $jar_path from $tag ($commit): $(find "$work/classes" -name '*.class' | wc -l) classes," \
    "sha256 $(sha256sum "$jar_path" | cut -d' ' -f1)"
