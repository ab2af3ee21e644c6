// COMET scores (Rei et al. 2020, Unbabel/COMET) through the `comet-score` command of the
// unbabel-comet Python package. kvcompact does not implement COMET itself: without the command
// there is no COMET score, only a clear error.
#pragma once

#include <string>
#include <vector>

namespace kvcompact {

/// How to run comet-score.
struct CometOptions {
  std::string model = "Unbabel/wmt22-comet-da";  ///< passed as --model NAME
  std::string executable = "comet-score";        ///< a name looked up on PATH, or a path holding '/'
  int gpus = -1;        ///< >= 0: pass --gpus N (0 = CPU); -1: COMET's default
  int batch_size = 0;   ///< > 0: pass --batch_size N
};

/// Full path of an executable file `name` found in the folders of $PATH, or "" when there is none.
/// A name holding '/' is returned as it is when it is an executable file (else "").
std::string find_executable(const std::string& name);

/// Parses comet-score's standard output: one line per segment holding "Segment I" and then
/// "score: X" (COMET 1.x prints "Segment I\tscore: X", 2.x "FILE\tSegment I\tscore: X"); other
/// lines (the system score, logging) are ignored. Returns the scores by segment index [segments].
/// Throws Error when an index is out of range or repeated, a score is not a number, or not every
/// segment 0..segments-1 got a score.
std::vector<double> parse_comet_output(const std::string& output, std::size_t segments);

/// Scores each (source, hypothesis, reference) triple with COMET: writes the three lists to
/// temporary files (one segment per line, line breaks inside a segment replaced by spaces), runs
/// `comet-score -s SRC -t HYP -r REF --model NAME [--gpus N] [--batch_size N]`, and returns its
/// per-segment scores [n] (model-dependent scale; wmt22-comet-da is about 0..1).
/// Throws Error "comet-score not found on PATH: install unbabel-comet (pip install unbabel-comet)
/// or use --metric chrf" when the executable is missing; Error when the lists are empty or differ
/// in length, when comet-score exits non-zero (with the last line it printed on stderr), or when
/// its output cannot be parsed (parse_comet_output).
std::vector<double> comet_score(const std::vector<std::string>& sources, const std::vector<std::string>& hypotheses,
                                const std::vector<std::string>& references, const CometOptions& options = {});

}  // namespace kvcompact
