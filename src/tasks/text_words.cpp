#include "tasks/text_words.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace kvcompact::text_words {

namespace fs = std::filesystem;

std::string read_data_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("{}: missing data file (set --data-dir to the shared data folder)", path));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  if (s.find_first_not_of(" \t\r\n") == std::string::npos) throw Error(fmt::format("{}: empty data file", path));
  return s;
}

std::vector<std::string> read_essay_words(const std::string& data_dir) {
  const fs::path dir = fs::path(data_dir) / "needle_haystack" / "PaulGrahamEssays";
  std::vector<fs::path> files;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".txt") files.push_back(it->path());
  if (ec || files.empty())
    throw Error(fmt::format("{}: missing essay folder or no .txt files in it (set --data-dir)", dir.string()));
  std::sort(files.begin(), files.end());
  std::vector<std::string> words;
  for (const fs::path& f : files) {
    std::vector<std::string> w = split_words(read_data_file(f.string()));
    words.insert(words.end(), std::make_move_iterator(w.begin()), std::make_move_iterator(w.end()));
  }
  return words;
}

std::vector<std::size_t> sentence_starts(const std::vector<std::string>& words) {
  std::vector<std::size_t> starts;
  for (std::size_t i = 1; i < words.size(); ++i)
    if (ends_sentence(words[i - 1]) && starts_upper(words[i])) starts.push_back(i);
  if (starts.empty()) starts.push_back(0);
  return starts;
}

}  // namespace kvcompact::text_words
