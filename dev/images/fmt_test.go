package images_test

import (
	"fmt"
	"strconv"
)

func itoa(n int64) string       { return strconv.FormatInt(n, 10) }
func sprintf04o(m int64) string { return fmt.Sprintf("%04o", m) }
