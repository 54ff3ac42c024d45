package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// nginxConf proxies /anthropic/ to the mock as the bare proxy does: keep-alive
// upstream pool, credential set, no buffering (so SSE flows as it arrives), no
// access log. Everything it writes stays under dir.
const nginxConf = `daemon off;
master_process on;
worker_processes auto;
worker_rlimit_nofile 20000;
pid {{dir}}/nginx.pid;
error_log {{dir}}/nginx-error.log warn;
events { worker_connections 10000; }
http {
	access_log off;
	client_body_temp_path {{dir}}/body;
	proxy_temp_path {{dir}}/proxy;
	fastcgi_temp_path {{dir}}/fastcgi;
	uwsgi_temp_path {{dir}}/uwsgi;
	scgi_temp_path {{dir}}/scgi;
	upstream mock { server {{upstream}}; keepalive 256; }
	server {
		listen {{listen}};
		location /anthropic/ {
			proxy_pass http://mock/;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_set_header X-Api-Key "{{key}}";
			proxy_buffering off;
		}
	}
}
`

// startNginx runs nginx in the foreground as a fourth path when it is installed;
// ok is false (and err nil) when it is not.
func (c *cluster) startNginx(ctx context.Context) (base string, cmd *exec.Cmd, ok bool, err error) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		for _, p := range []string{"/usr/sbin/nginx", "/usr/local/sbin/nginx"} {
			if _, statErr := os.Stat(p); statErr == nil {
				bin, err = p, nil
			}
		}
	}
	if err != nil {
		return "", nil, false, nil
	}
	port, err := freePort()
	if err != nil {
		return "", nil, false, err
	}
	dir := filepath.Join(c.bin, "nginx")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, false, err
	}
	conf := strings.NewReplacer("{{dir}}", dir, "{{upstream}}", strings.TrimPrefix(c.mockURL, "http://"),
		"{{listen}}", "127.0.0.1:"+port, "{{key}}", c.credential).Replace(nginxConf)
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return "", nil, false, err
	}
	base = "http://127.0.0.1:" + port + "/anthropic"
	cmd, err = c.start(ctx, bin, []string{"-p", dir, "-c", path, "-e", filepath.Join(dir, "nginx-error.log")}, nil, base+"/v1/models")
	if err != nil {
		return "", nil, false, fmt.Errorf("nginx: %w", err)
	}
	return base, cmd, true, nil
}
