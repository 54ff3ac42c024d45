// Package quickstart holds tests of a newcomer's first hour: the README's
// quick start run on a clean clone, and the deploy files (fly.toml,
// docker-compose.yml, Dockerfile) checked for what the README promises. It has
// no code of its own.
package quickstart
