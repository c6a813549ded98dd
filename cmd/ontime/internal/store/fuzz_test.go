package store

import (
	"strings"
	"testing"
)

// FuzzRedisURL: any text given as the redis URL gives a client or an
// error, never a panic, and an error never quotes the URL's password.
func FuzzRedisURL(f *testing.F) {
	for _, s := range []string{
		"redis://localhost:6379/0",
		"rediss://u:p@h:1/2?dial_timeout=3s",
		"redis+cluster://a:1,b:2,c:3",
		"rediss+cluster://u:p@a:1,b:2?addr=c:3",
		"redis+sentinel://u:p@s1:26379,s2:26379/mymaster/1?sentinel_password=x",
		"rediss+sentinel://s1/m",
		"redis+sentinel://,/",
		"redis+cluster://@",
		"unix:///tmp/redis.sock",
		"redis://u:hunter2@h:1/%zz",
		"redis+cluster://u:hunter2@h:1,h:%zz",
		"redis+sentinel://u:hunter2@s:1/m?%zz",
		"redis+sentinel://u:hunter2@s:1/m?bogus=1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, u string) {
		c, err := NewRedisClient(u)
		if err != nil {
			if strings.Contains(u, ":hunter2@") && strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("error quotes the password: %v", err)
			}
			return
		}
		_ = c.Close()
	})
}
