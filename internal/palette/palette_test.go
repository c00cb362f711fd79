package palette

import (
	"image/color"
	"testing"
)

func TestRGBA(t *testing.T) {
	if got := RGBA(Predicted); got != (color.NRGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 255}) {
		t.Errorf("predicted %v", got)
	}
	if got := RGBA("blue"); got != (color.NRGBA{A: 255}) {
		t.Errorf("a malformed colour: %v", got)
	}
	if Predicted == Realized {
		t.Error("predicted and realized share a colour")
	}
}
