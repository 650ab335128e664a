#!/usr/bin/env bash
# Builds ctasd's Flink catalog jar, target/flink/ctasd-flink.jar, with plain
# javac (Java 11 bytecode) against the jars of a Flink 2.3 distribution:
# FLINK_HOME, or the apache-flink PyPI package's pyflink directory.
#   FLINK_HOME=$(python -c 'import os, pyflink; print(os.path.dirname(pyflink.__file__))') flink/build.sh
set -euo pipefail
cd "$(dirname "$0")/.."
: "${FLINK_HOME:?set FLINK_HOME to a Flink 2.3 distribution (or the pyflink package directory)}"
classes=target/flink/classes
rm -rf "$classes" && mkdir -p "$classes"
classpath=$(ls "$FLINK_HOME"/lib/flink-dist-*.jar "$FLINK_HOME"/lib/flink-table-api-java-uber-*.jar | paste -sd:)
javac --release 11 -Xlint:all,-options,-serial -Werror -d "$classes" -cp "$classpath" \
  $(find flink/src -name '*.java' | sort)
cp -r flink/resources/. "$classes"/
jar --create --file target/flink/ctasd-flink.jar -C "$classes" .
echo "target/flink/ctasd-flink.jar"
