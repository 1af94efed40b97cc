// A directory under $TMPDIR removed with its contents when the object goes away.
#pragma once

#include <string>

namespace mcpmqtt::test {

class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // Writes `content` to path()/name and returns the full path.
  std::string write(const std::string& name, const std::string& content) const;

 private:
  std::string path_;
};

// Reads a whole file; empty when it cannot be read.
std::string read_file(const std::string& path);

}  // namespace mcpmqtt::test
