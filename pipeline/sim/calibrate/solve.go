package calibrate

import "time"

// solveFrom finds the value of a profile figure at which the simulator's
// prediction of some work matches its time measured on the device: at
// holds the predictions with the figure at 0 and at trial, and predict
// gives the prediction at any value. It takes the value linear between
// the two, then one secant step from there against whichever of them lies
// on the measured time's other side, for predictions that are not quite
// linear in the figure; at least 0. It returns the value and the
// prediction at the linear estimate (0 where that estimate is 0 and no
// step is taken). The predictions must grow with the figure: at[1] >
// at[0].
func solveFrom(measured time.Duration, trial float64, at [2]time.Duration, predict func(float64) (time.Duration, error)) (float64, time.Duration, error) {
	x := max(0, trial*float64(measured-at[0])/float64(at[1]-at[0]))
	if x == 0 {
		return 0, 0, nil
	}
	atX, err := predict(x)
	if err != nil {
		return 0, 0, err
	}
	other, atOther := 0.0, at[0]
	if atX < measured {
		other, atOther = trial, at[1]
	}
	if atX == atOther {
		return x, atX, nil
	}
	return max(0, x+(other-x)*float64(measured-atX)/float64(atOther-atX)), atX, nil
}
